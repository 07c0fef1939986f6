package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// execRoot runs the doppio command tree in this process with args and
// returns its stdout and error.
func execRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// effective is `doppio start --print-config` as flag name -> printed line.
func effective(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out, err := execRoot(t, append([]string{"start", "--id", "n1", "--print-config"}, args...)...)
	if err != nil {
		t.Fatalf("start %v --print-config: %v\n%s", args, err, out)
	}
	lines := map[string]string{}
	var last string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "- ") {
			lines[last] += "\n" + l
			continue
		}
		k, _, _ := strings.Cut(l, ":")
		lines[k], last = l, k
	}
	return lines
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "doppio.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigPrecedenceIsFlagThenEnvironmentThenFileThenDefault: one flag
// given every way takes the command line's value; without it, the
// environment's; without that, the file's; else the default.
func TestConfigPrecedenceIsFlagThenEnvironmentThenFileThenDefault(t *testing.T) {
	file := writeConfig(t, "raft-tick: 30ms\ncheck-rate: 1000\nzone: file-zone\n")
	t.Setenv("DOPPIO_RAFT_TICK", "40ms")
	t.Setenv("DOPPIO_CHECK_RATE", "2000")
	got := effective(t, "--config", file, "--raft-tick", "50ms")
	for flag, want := range map[string]string{
		"raft-tick":      "raft-tick: 50ms  # flag",
		"check-rate":     "check-rate: 2000  # environment",
		"zone":           "zone: file-zone  # file",
		"placement-mode": "placement-mode: spread  # default",
	} {
		if got[flag] != want {
			t.Errorf("%s: %q, want %q", flag, got[flag], want)
		}
	}
}

// TestConfigFileNamedByEnvironmentAndListsReplaceDefaults: DOPPIO_CONFIG
// names the file; a YAML list and a comma-separated variable both give a
// list flag its values; dashes become underscores in variable names.
func TestConfigFileNamedByEnvironmentAndListsReplaceDefaults(t *testing.T) {
	t.Setenv("DOPPIO_CONFIG", writeConfig(t, "etcd:\n  - http://e1:2379\n  - http://e2:2379\nembed-etcd: false\n"))
	t.Setenv("DOPPIO_MAX_DOCUMENT_BYTES", "4096")
	got := effective(t)
	if want := "etcd:  # file\n- http://e1:2379\n- http://e2:2379"; got["etcd"] != want {
		t.Errorf("etcd from a YAML list: %q, want %q", got["etcd"], want)
	}
	if want := "max-document-bytes: 4096  # environment"; got["max-document-bytes"] != want {
		t.Errorf("%q, want %q", got["max-document-bytes"], want)
	}
	t.Setenv("DOPPIO_ETCD", "http://e3:2379,http://e4:2379")
	if want := "etcd:  # environment\n- http://e3:2379\n- http://e4:2379"; effective(t)["etcd"] != want {
		t.Errorf("etcd from DOPPIO_ETCD: %q, want %q", effective(t)["etcd"], want)
	}
}

// TestPrintedConfigReadsBackTheSame: what --print-config prints is a
// configuration file giving the same configuration.
func TestPrintedConfigReadsBackTheSame(t *testing.T) {
	first, err := execRoot(t, "start", "--id", "n1", "--print-config", "--etcd", "http://a:1,http://b:2", "--zone", "z", "--standby", "--changelog-max-age", "2h")
	if err != nil {
		t.Fatal(err)
	}
	again, err := execRoot(t, "start", "--id", "n1", "--print-config", "--config", writeConfig(t, first))
	if err != nil {
		t.Fatalf("reading back:\n%s\n%v", first, err)
	}
	strip := func(s string) string {
		for _, src := range []string{"flag", "file", "default"} {
			s = strings.ReplaceAll(s, "  # "+src, "")
		}
		return s
	}
	if strip(first) != strip(again) {
		t.Errorf("printed\n%s\nread back as\n%s", first, again)
	}
}

// TestBadConfigIsRefusedNamingItsSource: an unknown key, a value of the
// wrong type in the file or the environment, and a missing file are each
// refused with the place to fix.
func TestBadConfigIsRefusedNamingItsSource(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, env, want string
	}{
		{"unknown key", "htp: 127.0.0.1:1\n", "", `"htp" is not a flag of any doppio command`},
		{"wrong type in file", "max-document-bytes: lots\n", "", `max-document-bytes: "lots": not a valid int for --max-document-bytes`},
		{"mapping value", "etcd: {a: 1}\n", "", "etcd: want a value or a list of values, not a mapping"},
		{"not a mapping", "- a\n- b\n", "", "want a mapping of flag names to values"},
		{"wrong type in environment", "", "DOPPIO_RAFT_TICK=soon", `DOPPIO_RAFT_TICK="soon": not a valid duration for --raft-tick`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"start", "--id", "n1", "--print-config"}
			if tc.yaml != "" {
				args = append(args, "--config", writeConfig(t, tc.yaml))
			}
			if k, v, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(k, v)
			}
			out, err := execRoot(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q (output %q)", err, tc.want, out)
			}
		})
	}
	if _, err := execRoot(t, "start", "--id", "n1", "--config", filepath.Join(t.TempDir(), "absent.yaml")); err == nil || !strings.Contains(err.Error(), "absent.yaml: no such file") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestRequestBodiesAreNotConfiguration: DOPPIO_DATA, a node's data
// directory, does not become `doppio put`'s body.
func TestRequestBodiesAreNotConfiguration(t *testing.T) {
	t.Setenv("DOPPIO_DATA", "/var/lib/doppio")
	t.Setenv("DOPPIO_DATA_DIR_IS_NOT_A_FLAG", "ignored")
	if got := effective(t)["data"]; got != "data: /var/lib/doppio  # environment" {
		t.Errorf("start: %q", got)
	}
	root := newRoot()
	put, _, err := root.Find([]string{"put"})
	if err != nil {
		t.Fatal(err)
	}
	if err := put.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	sources, err := applyConfig(put)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := put.Flags().GetString("data"); body != "" || sources["data"] != "" {
		t.Errorf("put's --data became %q (source %q)", body, sources["data"])
	}
}
