package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// The shortest credential the scan rejects ("xoxb-" and ten token bytes,
// 15 bytes in all) is rejected, alone and inside a longer value; one byte
// less is not a credential.
func TestK3_MetadataRejectsTheShortestCredentialShape(t *testing.T) {
	for _, v := range []string{"xoxb-0123456789", "xoxp-abcdefghij", "note xoxs-0123456789"} {
		_, err := model.NewMetadata("slack", []byte(`{"note":"`+v+`"}`))
		be := requireBoundError(t, err, "metadata.json", bound.Malformed)
		require.Contains(t, be.Detail, "credential", v)
		_, err = model.NewMetadata("slack", []byte(`{"`+v+`":1}`))
		requireBoundError(t, err, "metadata.json", bound.Malformed)
	}
	_, err := model.NewMetadata("slack", []byte(`{"note":"xoxb-012345678"}`))
	require.NoError(t, err, "nine token bytes are not the shape")
}
