package index

// SetProbeBudget sets the probing walk's budget for a test and returns the
// function that restores it.
func SetProbeBudget(perResult, slack int) (restore func()) {
	b, s := probeBudget, probeSlack
	probeBudget, probeSlack = perResult, slack
	return func() { probeBudget, probeSlack = b, s }
}
