// Package kafkatest runs a real Apache Kafka broker for tests and benchmark
// commands: a single KRaft node (broker and controller in one JVM, Kafka
// Version) on free loopback ports, its data in a directory of its own.
//
// In a test:
//
//	b := kafkatest.Start(t) // stopped and removed when t ends
//	b.CreateTopic(t, "changes", 3, map[string]*string{"max.message.bytes": kadm.StringPtr("65536")})
//	cl := b.Client(t, kgo.DefaultProduceTopic("changes"))
//
// In a command, Run starts a broker under a chosen directory and Stop ends it;
// Run on that directory again restarts the broker on the same address with
// its records. Internal topics (consumer offsets, transactions) have one
// replica and one partition each, and consumer groups rebalance without the
// initial delay.
//
// StartSecure (RunSecure in a command) adds two listeners to the plaintext
// one: SASL_SSL, whose users (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN) are
// given in Security, and SSL requiring a client certificate. Both present a
// certificate for 127.0.0.1 and localhost signed by a CA that
// internal/certs makes in CertsDir, where a test makes client certificates:
//
//	b := kafkatest.StartSecure(t, kafkatest.Security{Users: map[string]string{"app": "secret"}})
//	tlsCfg := &tls.Config{RootCAs: pool(b.CACert(t))}
//	cl, err := kgo.NewClient(kgo.SeedBrokers(b.SASLAddr()), kgo.DialTLSConfig(tlsCfg),
//		kgo.SASL(scram.Auth{User: "app", Pass: "secret"}.AsSha256Mechanism()))
//
// The broker creates a topic, with one partition, on a metadata request that
// asks for it; a franz-go client asks only with kgo.AllowAutoTopicCreation().
// A topic's max.message.bytes bounds a whole compressed record batch: to
// produce records that fit one by one, a client caps its batches with
// kgo.ProducerBatchMaxBytes at that size or less.
//
// # What it needs
//
// Java 17 or newer (java on PATH or in $JAVA_HOME). The first start on a
// machine also needs Maven (mvn) and Maven Central: it fetches kafka_2.13 and
// its runtime dependencies, plus a Log4j binding so the broker can say why it
// fails, into os.UserCacheDir()/doppio/kafka-<Version>/libs (by default
// ~/.cache/doppio/kafka-4.4.0/libs, 44 MB). Concurrent test processes wait on
// a file lock for one fetch; later starts use the jars without the network.
//
// The broker's output (warnings and errors only) goes to kafka.log in its
// directory; a failed start reports the log's tail. The JVM gets 512 MiB of
// heap and is killed with the Go process that started it, however that dies.
//
// A start runs the storage tool that formats the KRaft log directory, then
// the broker's JVM start, controller election and unfencing; a cold start
// fetches the jars first. `go test -v -run Produces ./internal/kafkatest`
// logs how long Start took (past figures: docs/benchmarks/micro.md).
package kafkatest
