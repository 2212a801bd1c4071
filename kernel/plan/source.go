package plan

import (
	"context"
	"errors"
)

// Source hands out leases on plans (K12). Implementations must be safe for
// concurrent use and must build their leases with NewLease, whose release
// callback is a quick reference decrement.
type Source interface {
	// Lease returns a lease on the source's current plan.
	Lease(ctx context.Context) (*Lease, error)
	// LeaseExact returns a lease on the plan named planID, or an error
	// matching ErrUnknownPlan when the source does not hold that plan.
	LeaseExact(ctx context.Context, planID ID) (*Lease, error)
}

var (
	// ErrUnknownPlan: the source has no plan with that ID — it was never
	// activated, or it is no longer retained.
	ErrUnknownPlan = errors.New("unknown plan")
	// ErrPlanReused: a plan with that ID was activated before. Plan IDs are
	// never reused, even after the earlier plan is gone.
	ErrPlanReused = errors.New("plan ID already used")
)

// IDError ties a source error (ErrUnknownPlan, ErrPlanReused) to the plan ID
// it is about.
type IDError struct {
	ID  ID
	Err error
}

func (e *IDError) Error() string { return e.Err.Error() + ": " + string(e.ID) }

// Unwrap returns the sentinel.
func (e *IDError) Unwrap() error { return e.Err }
