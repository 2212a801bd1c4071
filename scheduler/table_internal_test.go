package scheduler

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSeqKeyOrder: the byte order of submission-number keys is numeric
// order, which FIFO starts and List's order rely on.
func TestSeqKeyOrder(t *testing.T) {
	edges := []uint64{0, 1, 15, 16, 17, 255, 256, 4095, 4096, 1<<32 - 1, 1 << 32, math.MaxUint64 - 1, math.MaxUint64}
	r := rand.New(rand.NewPCG(1, 2))
	nums := append([]uint64(nil), edges...)
	for range 2000 {
		nums = append(nums, r.Uint64()>>r.IntN(64))
	}
	for i, a := range nums {
		for _, b := range nums[max(0, i-50) : i+1] {
			got := bytes.Compare(appendSeq(nil, a), appendSeq(nil, b))
			require.Equal(t, cmp.Compare(a, b), got, "%d vs %d", a, b)
		}
	}
	for _, a := range edges {
		for _, b := range edges {
			require.Equal(t, cmp.Compare(a, b), bytes.Compare(appendSeq(nil, a), appendSeq(nil, b)), "%d vs %d", a, b)
		}
	}
}

// TestIndexersRejectWrongArguments: a lookup with the wrong argument types
// is an error, never a panic.
func TestIndexersRejectWrongArguments(t *testing.T) {
	_, err := idIndexer{}.FromArgs(7)
	require.ErrorIs(t, err, errIndexArg)
	_, err = idIndexer{}.FromArgs()
	require.ErrorIs(t, err, errIndexArg)
	_, err = seqIndexer{}.FromArgs("7")
	require.ErrorIs(t, err, errIndexArg)
	_, err = seqIndexer{}.FromArgs(uint64(3), uint64(4))
	require.ErrorIs(t, err, errIndexArg)
	k, err := seqIndexer{}.FromArgs(uint64(18))
	require.NoError(t, err)
	_, want, _ := seqIndexer{}.FromObject(&record{state: Running, seq: 18})
	require.Equal(t, want, k)
}
