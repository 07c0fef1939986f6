package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func datastreamCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "datastream",
		Aliases: []string{"datastreams", "ds"},
		Short:   "Define, pause, resume and watch datastreams (change stream → Kafka pipelines)",
	}
	cmd.AddCommand(datastreamCreateCommand(f), datastreamListCommand(f), datastreamGetCommand(f), datastreamDeleteCommand(f),
		datastreamPauseCommand(f, "pause"), datastreamPauseCommand(f, "resume"), datastreamStatusCommand(f))
	return cmd
}

func datastreamCreateCommand(f *clientFlags) *cobra.Command {
	var (
		file      string
		spec      client.DatastreamSpec
		brokers   string
		tables    string
		parts     string
		failures  int
		resumeAft string
		sec       sinkSecurityFlags
	)
	cmd := &cobra.Command{
		Use:     "create NAME (-f def.json | --database DB --brokers host:port[,…] [flags])",
		Aliases: []string{"put"},
		Short:   "Create a datastream, or update its definition",
		Long: "Sends the definition in -f (\"-\" for stdin) as is, or one built from the flags:\n" +
			"  {\"database\":…,\"tables\":[…],\"partitions\":[…],\"sink\":{\"type\":\"kafka\",\"brokers\":[…],\n" +
			"   \"topics\":\"per-table\"|\"per-database\",\"topicPrefix\":…,\"format\":\"json\"|\"avro\"},\n" +
			"   \"autoPause\":{\"failures\":5,\"resumeAfter\":\"60s\"},\"from\":\"now\"|\"earliest\"}\n" +
			"The --sink-tls-* and --sink-sasl-* flags fill sink.tls and sink.sasl from files. The server\n" +
			"shows the password and client key as \"***\"; an update without them keeps the stored ones.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var body any
			if file != "" {
				b := &bodyFlags{file: file}
				if file == "-" {
					b.file = "" // stdin
				}
				raw, err := b.read(cmd)
				if err != nil {
					return err
				}
				body = raw
			} else {
				spec.Sink.Type = "kafka"
				spec.Sink.Brokers = splitList(brokers)
				spec.Tables = splitList(tables)
				for _, p := range splitList(parts) {
					n, err := strconv.Atoi(p)
					if err != nil {
						return fmt.Errorf("--partitions: %q is not a partition number", p)
					}
					spec.Partitions = append(spec.Partitions, n)
				}
				if failures != 0 || resumeAft != "" {
					spec.AutoPause = &client.AutoPause{Failures: failures, ResumeAfter: resumeAft}
				}
				var err error
				if spec.Sink.TLS, spec.Sink.SASL, err = sec.read(); err != nil {
					return err
				}
				body = spec
			}
			d, created, err := f.client().PutDatastream(cmd.Context(), args[0], body)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "datastream %s: %s\n", d.Name, createdWord(created))
			return printJSON(cmd, d)
		}),
	}
	fl := cmd.Flags()
	fl.StringVarP(&file, "file", "f", "", `definition file ("-" for stdin); the flags below are then ignored`)
	fl.StringVar(&spec.Database, "database", "", "database whose changes the stream carries")
	fl.StringVar(&brokers, "brokers", "", "Kafka bootstrap brokers, host:port,…")
	fl.StringVar(&tables, "tables", "", "tables to carry, comma-separated (default: all)")
	fl.StringVar(&parts, "partitions", "", "partitions to read, comma-separated (default: all)")
	fl.StringVar(&spec.Sink.Topics, "topics", "", `"per-table" (default) or "per-database"`)
	fl.StringVar(&spec.Sink.TopicPrefix, "topic-prefix", "", "prefix of topic names")
	fl.StringVar(&spec.Sink.Format, "format", "", `record values: "json" (default) or "avro"`)
	fl.IntVar(&spec.Sink.TopicPartitions, "topic-partitions", 0, "partitions of topics the stream creates (default: the broker's)")
	fl.IntVar(&failures, "auto-pause-failures", 0, "consecutive failures that auto-pause a partition (default 5)")
	fl.StringVar(&resumeAft, "auto-pause-resume-after", "", `how long an auto-paused partition waits (default "60s")`)
	fl.StringVar(&spec.From, "from", "", `where partitions start: "now" (default) or "earliest"`)
	sec.register(fl)
	return cmd
}

// sinkSecurityFlags are the flags of a sink's TLS and SASL settings.
type sinkSecurityFlags struct {
	tls                      bool
	ca, cert, key, server    string
	mechanism, user, pwdFile string
}

func (s *sinkSecurityFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&s.tls, "sink-tls", false, "dial the brokers over TLS, trusting the system's roots (implied by the other --sink-tls-* flags)")
	fl.StringVar(&s.ca, "sink-tls-ca", "", "PEM file of the CA that signs the brokers' certificates")
	fl.StringVar(&s.cert, "sink-tls-cert", "", "PEM file of a client certificate, for brokers that require one")
	fl.StringVar(&s.key, "sink-tls-key", "", "PEM file of the client certificate's private key")
	fl.StringVar(&s.server, "sink-tls-server-name", "", "name the brokers' certificates must carry (default: the host dialed)")
	fl.StringVar(&s.mechanism, "sink-sasl-mechanism", "", `SASL mechanism: "SCRAM-SHA-256", "SCRAM-SHA-512" or "PLAIN" (PLAIN needs TLS)`)
	fl.StringVar(&s.user, "sink-sasl-user", "", "SASL username")
	fl.StringVar(&s.pwdFile, "sink-sasl-password-file", "", "file holding the SASL password (one line; omitted on an update: the stored one is kept)")
}

// read builds the sink's settings from the flags and the files they name;
// nil where no flag of the kind is given.
func (s *sinkSecurityFlags) read() (*client.DatastreamTLS, *client.DatastreamSASL, error) {
	var tls *client.DatastreamTLS
	if s.tls || s.ca != "" || s.cert != "" || s.key != "" || s.server != "" {
		tls = &client.DatastreamTLS{ServerName: s.server}
		for _, f := range []struct {
			flag, path string
			to         *string
		}{{"--sink-tls-ca", s.ca, &tls.CA}, {"--sink-tls-cert", s.cert, &tls.Cert}, {"--sink-tls-key", s.key, &tls.Key}} {
			if f.path == "" {
				continue
			}
			b, err := os.ReadFile(f.path)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f.flag, err)
			}
			*f.to = string(b)
		}
	}
	var sasl *client.DatastreamSASL
	if s.mechanism != "" || s.user != "" || s.pwdFile != "" {
		sasl = &client.DatastreamSASL{Mechanism: s.mechanism, Username: s.user}
		if s.pwdFile != "" {
			b, err := os.ReadFile(s.pwdFile)
			if err != nil {
				return nil, nil, fmt.Errorf("--sink-sasl-password-file: %w", err)
			}
			sasl.Password = strings.TrimRight(string(b), "\r\n")
			if sasl.Password == "" {
				return nil, nil, fmt.Errorf("--sink-sasl-password-file: %s is empty", s.pwdFile)
			}
		}
	}
	return tls, sasl, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func datastreamListCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the datastreams",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ds, err := f.client().ListDatastreams(cmd.Context())
			if err != nil {
				return err
			}
			return printOutput(cmd, ds, func(out io.Writer) error {
				w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAME\tDATABASE\tSTATE\tTOPICS\tFORMAT\tBROKERS")
				for _, d := range ds {
					state := d.State
					if len(d.PausedPartitions) > 0 {
						state += fmt.Sprint(d.PausedPartitions)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s%s\t%s\t%s\n", d.Name, d.Database, state, d.Sink.TopicPrefix, d.Sink.Topics, d.Sink.Format, strings.Join(d.Sink.Brokers, ","))
				}
				return w.Flush()
			})
		}),
	}
}

func datastreamGetCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show a datastream's definition and state",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			d, err := f.client().GetDatastream(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd, d)
		}),
	}
}

func datastreamDeleteCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a datastream; its tasks stop and its checkpoints are removed",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := f.client().DeleteDatastream(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "datastream %s deleted\n", args[0])
			return nil
		}),
	}
}

func datastreamPauseCommand(f *clientFlags, verb string) *cobra.Command {
	var parts string
	cmd := &cobra.Command{
		Use:   verb + " NAME [--partitions 0,3]",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a whole datastream, or some of its partitions",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var ps []int
			for _, p := range splitList(parts) {
				n, err := strconv.Atoi(p)
				if err != nil {
					return fmt.Errorf("--partitions: %q is not a partition number", p)
				}
				ps = append(ps, n)
			}
			c := f.client()
			call := c.PauseDatastream
			if verb == "resume" {
				call = c.ResumeDatastream
			}
			d, err := call(cmd.Context(), args[0], ps...)
			if err != nil {
				return err
			}
			state := d.State
			if len(d.PausedPartitions) > 0 {
				state += fmt.Sprintf(" (paused partitions %v)", d.PausedPartitions)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "datastream %s: %s\n", d.Name, state)
			return nil
		}),
	}
	cmd.Flags().StringVar(&parts, "partitions", "", "partitions, comma-separated (default: the whole datastream)")
	return cmd
}

func datastreamStatusCommand(f *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status NAME [-o json|yaml|table]",
		Short: "Show each partition's task: state, owner, checkpoint, lag, throughput, last error",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			st, err := f.client().GetDatastreamStatus(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd, st)
			}
			return printOutput(cmd, st, func(out io.Writer) error {
				fmt.Fprintf(out, "datastream %s (database %s): %s\n", st.Name, st.Database, st.State)
				w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "PARTITION\tSTATE\tOWNER\tCHECKPOINT\tLATEST\tLAG TXNS\tLAG\tEVENTS/S\tLAST ERROR")
				for _, p := range st.Partitions {
					state := p.State
					if p.AutoPausedUntil != nil {
						state += " until " + p.AutoPausedUntil.Local().Format(time.TimeOnly)
					}
					if p.Detail != "" {
						state += " (" + p.Detail + ")"
					}
					if s := p.Snapshot; s != nil {
						state += fmt.Sprintf(" (snapshot at %s: %d documents)", s.SCN, s.Documents)
					}
					lag := "-"
					if p.Lag.Seconds != nil {
						lag = (time.Duration(*p.Lag.Seconds * float64(time.Second))).Round(time.Millisecond).String()
					}
					lastErr := "-"
					if p.LastError != nil {
						lastErr = p.LastError.At.Local().Format(time.TimeOnly) + " " + p.LastError.Message
					}
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%.1f\t%s\n", p.Partition, state, dash(p.Owner), dash(p.Checkpoint), dash(p.Latest),
						p.Lag.Transactions, lag, p.Throughput, lastErr)
				}
				return w.Flush()
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON (the same as -o json)")
	return cmd
}
