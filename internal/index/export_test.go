package index

// SetProbeBudget sets the probing walk's budget for a test and returns the
// function that restores it.
func SetProbeBudget(perResult, slack int) (restore func()) {
	b, s, g := probeBudget, probeSlack, gatherBudget
	probeBudget, probeSlack, gatherBudget = perResult, slack, 0
	return func() { probeBudget, probeSlack, gatherBudget = b, s, g }
}
