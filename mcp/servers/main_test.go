package servers

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	serveIfAsked()
	goleak.VerifyTestMain(m)
}
