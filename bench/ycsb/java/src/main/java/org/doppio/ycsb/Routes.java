package org.doppio.ycsb;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Smart routing, as the Go client's WithSmartRouting: the leader of each partition of a database
 * from GET /_cluster, and the partition of a partition key (xxhash64 of its tuple encoding, modulo
 * the partition count; internal/router.PartitionOf). A request sent to the leader is not
 * forwarded by another node. The table is read once, at start: a leader that moves later still
 * answers through the node it was sent to (that node forwards).
 */
final class Routes {
  private final String[] leaders; // partition -> origin, or null

  private Routes(String[] leaders) {
    this.leaders = leaders;
  }

  /** Reads /_cluster from origin; null when the database's partitions are not all led. */
  static Routes fetch(String origin, String db) throws IOException {
    Http1 c = new Http1(URI.create(origin));
    Http1.Response r;
    try {
      r = c.send("GET", "/_cluster", null);
    } finally {
      c.close();
    }
    if (r.status() != 200) {
      throw new IOException("GET /_cluster: " + r.status());
    }
    Map<String, String> nodes = new HashMap<>();
    List<String[]> parts = new ArrayList<>(); // {partition, leader}
    try (JsonParser jp = Json.FACTORY.createParser(r.body())) {
      if (jp.nextToken() != JsonToken.START_OBJECT) {
        throw new IOException("/_cluster: not an object");
      }
      while (jp.nextToken() == JsonToken.FIELD_NAME) {
        String name = jp.currentName();
        JsonToken t = jp.nextToken();
        if (t == JsonToken.START_ARRAY && (name.equals("nodes") || name.equals("partitions"))) {
          while (jp.nextToken() == JsonToken.START_OBJECT) {
            Map<String, String> o = new HashMap<>();
            while (jp.nextToken() == JsonToken.FIELD_NAME) {
              String k = jp.currentName();
              JsonToken v = jp.nextToken();
              if (v.isScalarValue()) {
                o.put(k, jp.getText());
              } else {
                jp.skipChildren();
              }
            }
            if (name.equals("nodes")) {
              if ("alive".equals(o.get("state")) && o.get("http") != null) {
                nodes.put(o.get("id"), Security.scheme() + "://" + o.get("http"));
              }
            } else if (db.equals(o.get("database"))) {
              parts.add(new String[] {o.get("partition"), o.get("leader")});
            }
          }
        } else {
          jp.skipChildren();
        }
      }
    }
    if (parts.isEmpty()) {
      return null;
    }
    String[] leaders = new String[parts.size()];
    for (String[] p : parts) {
      int i = Integer.parseInt(p[0]);
      if (i < 0 || i >= leaders.length) {
        return null;
      }
      leaders[i] = nodes.get(p[1]);
    }
    for (String l : leaders) {
      if (l == null) {
        return null;
      }
    }
    return new Routes(leaders);
  }

  /** The origin of the leader of the partition holding partition key pk (a string). */
  String leaderOf(String pk) {
    ByteArrayOutputStream enc = new ByteArrayOutputStream(pk.length() + 4);
    DoppioClient.Keys.appendString(enc, pk);
    long h = XXHash64.hash(enc.toByteArray());
    return leaders[(int) Long.remainderUnsigned(h, leaders.length)];
  }

  int partitions() {
    return leaders.length;
  }

  /** XXH64 with seed 0 (github.com/cespare/xxhash's Sum64). */
  static final class XXHash64 {
    private static final long P1 = 0x9E3779B185EBCA87L;
    private static final long P2 = 0xC2B2AE3D27D4EB4FL;
    private static final long P3 = 0x165667B19E3779F9L;
    private static final long P4 = 0x85EBCA77C2B2AE63L;
    private static final long P5 = 0x27D4EB2F165667C5L;

    private XXHash64() {}

    private static long round(long acc, long input) {
      return Long.rotateLeft(acc + input * P2, 31) * P1;
    }

    private static long merge(long acc, long v) {
      return (acc ^ round(0, v)) * P1 + P4;
    }

    private static long le64(byte[] b, int i) {
      long v = 0;
      for (int k = 7; k >= 0; k--) {
        v = (v << 8) | (b[i + k] & 0xFFL);
      }
      return v;
    }

    private static long le32(byte[] b, int i) {
      return (b[i] & 0xFFL) | (b[i + 1] & 0xFFL) << 8 | (b[i + 2] & 0xFFL) << 16 | (b[i + 3] & 0xFFL) << 24;
    }

    static long hash(byte[] b) {
      int n = b.length;
      int i = 0;
      long h;
      if (n >= 32) {
        long v1 = P1 + P2;
        long v2 = P2;
        long v3 = 0;
        long v4 = -P1;
        for (; i + 32 <= n; i += 32) {
          v1 = round(v1, le64(b, i));
          v2 = round(v2, le64(b, i + 8));
          v3 = round(v3, le64(b, i + 16));
          v4 = round(v4, le64(b, i + 24));
        }
        h = Long.rotateLeft(v1, 1) + Long.rotateLeft(v2, 7) + Long.rotateLeft(v3, 12) + Long.rotateLeft(v4, 18);
        h = merge(h, v1);
        h = merge(h, v2);
        h = merge(h, v3);
        h = merge(h, v4);
      } else {
        h = P5;
      }
      h += n;
      for (; i + 8 <= n; i += 8) {
        h ^= round(0, le64(b, i));
        h = Long.rotateLeft(h, 27) * P1 + P4;
      }
      if (i + 4 <= n) {
        h ^= le32(b, i) * P1;
        h = Long.rotateLeft(h, 23) * P2 + P3;
        i += 4;
      }
      for (; i < n; i++) {
        h ^= (b[i] & 0xFFL) * P5;
        h = Long.rotateLeft(h, 11) * P1;
      }
      h ^= h >>> 33;
      h *= P2;
      h ^= h >>> 29;
      h *= P3;
      h ^= h >>> 32;
      return h;
    }

    /** Prints the hash of each argument (UTF-8), to check against Go's. */
    public static void main(String[] args) {
      for (String a : args) {
        System.out.println(a + " " + Long.toUnsignedString(hash(a.getBytes(StandardCharsets.UTF_8))));
      }
    }
  }
}
