package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/client/wire"

	"github.com/spf13/cobra"
)

// checkCommand is `doppio check {db}`: a consistency check of every
// partition, one at a time, with progress.
func checkCommand(f *clientFlags) *cobra.Command {
	var noRepair bool
	var only int
	cmd := &cobra.Command{
		Use:   "check DB",
		Short: "Check that every replica of each partition of DB holds the same data (and rebuild those that differ)",
		Long: `Runs a consistency check of each partition of DB at its leader: every
replica sums its data at the same log position and the leader compares them.
A follower that differs from the majority is rebuilt from a snapshot unless
--no-repair. Exits 6 if a partition is left inconsistent, else 5 if the
server cannot be reached, 3 if DB does not exist, 1 if a partition could
not be checked otherwise.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db := args[0]
			base := strings.TrimSuffix(f.server, "/")
			hc := f.httpClient()
			out := cmd.OutOrStdout()
			partitions := []int{only}
			if only < 0 {
				n, err := partitionCount(hc, base, db)
				if err != nil {
					return err
				}
				partitions = partitions[:0]
				for p := range n {
					partitions = append(partitions, p)
				}
			}
			bad := 0
			counts := map[string]int{}
			var failure error // the first partition that could not be checked
			for i, p := range partitions {
				pc, err := checkPartition(hc, base, db, p, !noRepair)
				if err != nil {
					pc = wire.PartitionCheck{Database: db, Partition: p, Result: "failed", Error: err.Error()}
					if failure == nil {
						failure = err
					}
				}
				counts[pc.Result]++
				printPartitionCheck(out, i+1, len(partitions), pc)
				if pc.Result == "inconsistent" || pc.Result == "failed" {
					bad++
				}
			}
			var parts []string
			for _, r := range []string{"consistent", "repaired", "incomplete", "inconsistent", "failed"} {
				if counts[r] > 0 {
					parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
				}
			}
			fmt.Fprintf(out, "%s: %d partitions checked: %s\n", db, len(partitions), strings.Join(parts, ", "))
			if bad > 0 {
				// Inconsistency wins the exit code; else the first failure's.
				cause := failure
				if counts["inconsistent"] > 0 {
					cause = errInconsistent
				}
				return detailError{msg: fmt.Sprintf("%d of %d partitions of %s are inconsistent or could not be checked", bad, len(partitions), db), err: cause}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noRepair, "no-repair", false, "only report replicas that differ; do not rebuild them")
	cmd.Flags().IntVar(&only, "partition", -1, "check only this partition")
	return cmd
}

func printPartitionCheck(out io.Writer, i, n int, pc wire.PartitionCheck) {
	fmt.Fprintf(out, "[%d/%d] partition %d: %s", i, n, pc.Partition, pc.Result)
	if pc.Error != "" {
		fmt.Fprintf(out, ": %s\n", pc.Error)
		return
	}
	fmt.Fprintf(out, " at scn %s (leader %s, %d keys, %d bytes)\n", pc.SCN, pc.Leader, pc.Keys, pc.Bytes)
	if pc.HandedTo != "" {
		fmt.Fprintf(out, "  leader %s differed from the majority: leadership handed to %s\n", pc.Leader, pc.HandedTo)
	}
	for _, rc := range pc.Replicas {
		switch rc.Status {
		case "leader", "ok":
			continue
		case "mismatch":
			fmt.Fprintf(out, "  replica %s differs in %s", rc.Node, strings.Join(rc.Ranges, ", "))
			if rc.Repaired {
				fmt.Fprint(out, ": rebuilt from a snapshot")
			} else if rc.RepairError != "" {
				fmt.Fprintf(out, ": not repaired: %s", rc.RepairError)
			}
			fmt.Fprintln(out)
		default:
			fmt.Fprintf(out, "  replica %s %s: %s\n", rc.Node, rc.Status, rc.Error)
		}
	}
}

// partitionCount reads how many partitions db has.
func partitionCount(hc *http.Client, base, db string) (int, error) {
	var d struct {
		Partitions int `json:"partitions"`
	}
	if err := callJSON(hc, http.MethodGet, base+"/_schemas/"+url.PathEscape(db), &d); err != nil {
		return 0, err
	}
	return d.Partitions, nil
}

func checkPartition(hc *http.Client, base, db string, p int, repair bool) (wire.PartitionCheck, error) {
	var pc wire.PartitionCheck
	u := fmt.Sprintf("%s/_cluster/check/%s/%d?repair=%t", base, url.PathEscape(db), p, repair)
	return pc, callJSON(hc, http.MethodPost, u, &pc)
}

// callJSON makes a request without a deadline (a check reads whole
// partitions, throttled) and decodes the answer, or the problem's detail.
func callJSON(hc *http.Client, method, u string, v any) error {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		pe := &client.Error{}
		if json.Unmarshal(b, pe) != nil || pe.Detail == "" {
			pe.Detail = string(b)
		}
		pe.Status = resp.StatusCode
		// Printed as the detail alone; the status decides the exit code.
		return detailError{msg: pe.Detail, err: pe}
	}
	return json.Unmarshal(b, v)
}
