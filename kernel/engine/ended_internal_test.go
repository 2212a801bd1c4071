package engine

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// A waiter's channel, made before the end, closes at the end; a channel
// asked for after the end is closed already, and no channel is made for it.
func TestEndedSignal(t *testing.T) {
	var e ended
	require.False(t, e.fired())
	early := e.wait()
	require.False(t, closed(early))
	require.Equal(t, early, e.wait(), "every waiter shares one channel")
	e.fire()
	require.True(t, e.fired())
	require.True(t, closed(early))
	require.True(t, closed(e.wait()))

	var quiet ended
	quiet.fire()
	require.True(t, quiet.fired())
	require.True(t, closed(quiet.wait()))
	require.Equal(t, endedGate, quiet.gate.Load(), "an end nobody waited for makes no channel")
}

// Waiters racing the end all see it: none is left with a channel that
// never closes.
func TestEndedSignalRace(t *testing.T) {
	for range 200 {
		var e ended
		var wg sync.WaitGroup
		chans := make([]<-chan struct{}, 8)
		for i := range chans {
			wg.Go(func() { chans[i] = e.wait() })
		}
		e.fire()
		wg.Wait()
		for _, c := range chans {
			<-c // blocks forever, and fails the test by its timeout, if a waiter's channel never closes
		}
	}
}
