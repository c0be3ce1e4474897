package access

import (
	"errors"
	"time"
)

// WaitingError says a request is not usable yet. It is not a failure: the engine shows
// Reason and Message on the object and calls again after RequeueAfter, without the
// error backoff.
type WaitingError struct {
	Reason       string
	Message      string
	RequeueAfter time.Duration
	// Final marks a state that only a change elsewhere resolves (a denied request): the
	// engine still retries, but slowly.
	Final bool
}

func (w *WaitingError) Error() string { return w.Reason + ": " + w.Message }

// AsWaiting returns the WaitingError in err's chain, if any.
func AsWaiting(err error) (*WaitingError, bool) {
	var w *WaitingError
	ok := errors.As(err, &w)
	return w, ok
}

// LeftBehind says that a release finished but left objects to their owner that it
// could not remove (they are no longer the runtime's to remove). It comes with a
// release reported done; the engine reports it in an event and the log, since the
// object it concerns is about to go.
type LeftBehind struct {
	Message string
}

func (l *LeftBehind) Error() string { return "left behind: " + l.Message }
