package main

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/doppio-db/doppio/internal/certs"
	"github.com/spf13/cobra"
)

// defaultCertsDir is where `doppio cert` writes when neither --certs-dir
// nor DOPPIO_CERTS_DIR says.
const defaultCertsDir = "./certs"

// certCommand is `doppio cert`: the certificates of a secure cluster. It
// reads the root's persistent --certs-dir (f.certsDir).
func certCommand(f *clientFlags) *cobra.Command {
	var (
		caKey     string
		lifetime  time.Duration
		overwrite bool
	)
	dir := func() string {
		if f.certsDir == "" {
			return defaultCertsDir
		}
		return f.certsDir
	}
	opts := func() certs.Options {
		return certs.Options{CAKey: caKey, Lifetime: lifetime, Overwrite: overwrite}
	}
	cmd := &cobra.Command{
		Use:         "cert",
		Annotations: map[string]string{serverCommand: "cert"},
		Short:       "Create and list the certificates of a secure cluster",
		Long: `Create and list the certificates of a secure cluster in a certs directory
(--certs-dir, $DOPPIO_CERTS_DIR, default ./certs):

  doppio cert create-ca                         ca.crt, ca.key
  doppio cert create-node localhost 127.0.0.1   node.crt, node.key
  doppio cert create-client root                client.root.crt, client.root.key

Every node needs ca.crt, node.crt and node.key (node.crt names every host
and address clients and peers reach it by); a client needs ca.crt and its
client.USER files. Keep ca.key away from the nodes when you can: --ca-key
puts it elsewhere. Existing files are kept unless --overwrite is given.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&caKey, "ca-key", "", "path of the CA key (default: ca.key in the certs directory)")
	pf.DurationVar(&lifetime, "lifetime", 0, "validity of the new certificate (default: 10 years for a CA, 5 for the others)")
	pf.BoolVar(&overwrite, "overwrite", false, "replace existing files")

	createCA := &cobra.Command{
		Use:   "create-ca",
		Short: "Create the cluster's certificate authority",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := certs.CreateCA(dir(), opts()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", filepath.Join(dir(), certs.CAFile))
			return nil
		},
	}
	createNode := &cobra.Command{
		Use:   "create-node HOST…",
		Short: "Create the node certificate for the host names and IP addresses given",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, hosts []string) error {
			if err := certs.CreateNode(dir(), hosts, opts()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s for %s\n", filepath.Join(dir(), certs.NodeCertFile), strings.Join(hosts, ", "))
			return nil
		},
	}
	createClient := &cobra.Command{
		Use:   "create-client USER",
		Short: "Create a client certificate that authenticates USER",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := certs.CreateClient(dir(), args[0], opts()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", filepath.Join(dir(), certs.ClientCertFile(args[0])))
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the certificates of the certs directory: subject, names, expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listCerts(cmd, dir())
		},
	}
	cmd.AddCommand(createCA, createNode, createClient, list)
	return cmd
}

// listCerts prints a line per certificate file of dir.
func listCerts(cmd *cobra.Command, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.crt"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no certificate (*.crt) in %s", dir)
	}
	slices.Sort(files)
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "FILE\tKIND\tSUBJECT\tNAMES\tEXPIRES")
	for _, path := range files {
		c, err := certs.ReadCertificate(path)
		if err != nil {
			return err
		}
		names := slices.Clone(c.DNSNames)
		for _, ip := range c.IPAddresses {
			names = append(names, ip.String())
		}
		sans := strings.Join(names, ",")
		if sans == "" {
			sans = "-"
		}
		expires := c.NotAfter.UTC().Format(time.RFC3339)
		if time.Now().After(c.NotAfter) {
			expires += " (EXPIRED)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", filepath.Base(path), certKind(c), c.Subject.String(), sans, expires)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, certs.CAKeyFile)); err == nil {
		fmt.Fprintf(cmd.OutOrStdout(), "\n%s is here: keep it off the nodes where you can (--ca-key)\n", certs.CAKeyFile)
	}
	return nil
}

func certKind(c *x509.Certificate) string {
	switch {
	case c.IsCA:
		return "ca"
	case c.Subject.CommonName == certs.NodeCommonName:
		return "node"
	}
	return "client"
}
