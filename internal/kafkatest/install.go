package kafkatest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/doppio-db/doppio/internal/cachefill"
)

const (
	// Version is the Apache Kafka release the broker runs. Its broker needs
	// Java 17 or newer.
	Version = "4.4.0"
	// log4jVersion is the Log4j 2 that kafka_2.13 Version depends on; the
	// SLF4J binding must match it, and Kafka's Maven artifact brings none.
	log4jVersion = "2.25.5"
)

// pom lists what the broker needs at run time: Kafka itself and a logging
// backend, without which the broker prints nothing, not even why it failed.
const pom = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.doppio.kafkatest</groupId>
  <artifactId>kafka-broker-libs</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>` + Version + `</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>` + log4jVersion + `</version>
    </dependency>
  </dependencies>
</project>
`

// libsDir returns the directory holding the broker's jars, fetching them from
// Maven Central on first use. The directory is shared by all processes of the
// user: a file lock serializes the fetch, and the directory appears by an
// atomic rename only once complete, so a present directory is always usable
// and is used without touching the network.
func libsDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kafkatest: no cache directory for the Kafka jars: %w", err)
	}
	root := filepath.Join(cache, "doppio", "kafka-"+Version)
	libs := filepath.Join(root, "libs")
	done := func() bool { return complete(libs) }
	if err := cachefill.Fill(filepath.Join(root, "lock"), done, func() error { return fetch(root, libs) }); err != nil {
		return "", err
	}
	return libs, nil
}

// kafkaJar is the jar whose presence marks a libs directory as Kafka's.
const kafkaJar = "kafka_2.13-" + Version + ".jar"

func complete(libs string) bool {
	_, err := os.Stat(filepath.Join(libs, kafkaJar))
	return err == nil
}

// fetch has Maven resolve the broker's runtime classpath into a scratch
// directory under root and renames it to libs.
func fetch(root, libs string) error {
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("kafkatest: mvn not found, needed once to fetch Kafka %s from Maven Central into %s: %w", Version, libs, err)
	}
	tmp, err := os.MkdirTemp(root, "fetch-")
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "pom.xml"), []byte(pom), 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	out := filepath.Join(tmp, "libs")
	cmd := exec.Command(mvn, "-q", "-B", "dependency:copy-dependencies",
		"-DincludeScope=runtime", "-DoutputDirectory="+out)
	cmd.Dir = tmp
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kafkatest: fetching Kafka %s with Maven: %w\n%s", Version, err, strings.TrimSpace(output.String()))
	}
	if !complete(out) {
		return fmt.Errorf("kafkatest: Maven succeeded but %s is missing from %s\n%s", kafkaJar, out, strings.TrimSpace(output.String()))
	}
	if err := os.Rename(out, libs); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	return nil
}

// javaPath finds the java launcher, preferring $JAVA_HOME as Kafka's own
// scripts do.
func javaPath() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("kafkatest: java not found (Kafka %s needs Java 17 or newer on PATH or in $JAVA_HOME)", Version)
	}
	return p, err
}
