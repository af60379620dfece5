package dispatch

// The per-principal bounds (Options.Principals): a call is charged its
// principal's rate once, where it enters the pipeline (a call run now, or
// an async call as it is accepted; not a step an execution runs later),
// and holds one of its principal's share of the tool's bulkhead from
// before it enters the bulkhead until its slot is freed.

// Charge spends n calls of caller's rate (auth.limits.rate) for work
// accepted without passing Check or Execute — an async batch's calls
// (executions.SubmitBatch; they run later marked Request.Charged), a
// search (the server) — or refuses them all: a 429 with when to retry
// (tools.CodePrincipalRate). Without per-principal bounds it charges
// nothing.
func (d *Dispatcher) Charge(caller string, n int) error {
	p := d.current().Principals // the bounds a reload swapped in last
	if p == nil {
		return nil
	}
	return p.ChargeN(caller, n)
}

// charge spends one call of the caller's rate.
func (d *Dispatcher) charge(c *call) error {
	if c.st.Principals == nil {
		return nil
	}
	return c.st.Principals.Charge(c.req.Caller)
}

// principalHold charges a call that runs now, and takes its share; the
// release is nil when nothing is held.
func (d *Dispatcher) principalHold(c *call) (func(), error) {
	if c.st.Principals == nil {
		return nil, nil
	}
	if c.req.ExecutionID == "" && !c.req.Charged {
		if err := d.charge(c); err != nil {
			return nil, err
		}
	}
	return c.st.Principals.Hold(c.req.Caller, c.entry)
}

// both frees a slot and what the principal held with it.
func both(release, held func()) func() {
	if held == nil {
		return release
	}
	return func() { release(); held() }
}

func freeHeld(held func()) {
	if held != nil {
		held()
	}
}
