package org.doppio.ycsb;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.atomic.AtomicInteger;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * YCSB binding for Doppio's REST API.
 *
 * <p>A YCSB record is one document of table {@code doppio.table} (default {@code usertable}) in
 * database {@code doppio.db} (default {@code ycsb}), an Avro record of the string fields
 * field0..field9. Its key has two parts: the document group {@code g}, the first
 * {@code doppio.groupprefix} characters of the YCSB key (default 7: "user" and three digits), and
 * the YCSB key {@code k}. Groups are key prefixes, so group order then key order is the YCSB key
 * order, and a scan is a collection read of the start key's group from the start key on,
 * continued into the next groups when the group ends. Reads project the asked fields with
 * {@code ?fields=}; update is a PATCH {@code $set}; insert a PUT; delete a DELETE.
 *
 * <p>The collection API has no inclusive start key, only an opaque cursor that resumes after a
 * key; the scan builds that cursor from the key encoding (internal/keys: the tuple of the key
 * just before the start key, base64url). That couples this binding to the cursor format; a
 * {@code from=} parameter on collection reads would remove it.
 *
 * <p>{@code doppio.http=jdk} (the default): one java.net.http.HttpClient (HTTP/1.1, keep-alive
 * connection reuse) shared by all threads. {@code doppio.http=socket}: each thread its own
 * blocking keep-alive HTTP/1.1 connection ({@link Http1}), the way each JDBC thread has its own
 * connection. Thread i talks to node {@code doppio.urls[i mod n]} (comma-separated); a node that
 * does not lead a key's partition forwards the request to the leader. With {@code
 * doppio.routing=smart} every request goes straight to its partition's leader instead ({@link
 * Routes}, read from GET /_cluster at start), as the Go client's smart routing does.
 */
public class DoppioClient extends DB {
  private static final Object LOCK = new Object();
  private static HttpClient http;
  private static Routes routes;
  private static boolean routesFetched;
  private static final AtomicInteger THREADS = new AtomicInteger();

  private String origin; // scheme://host:port
  private String base;   // /db/table/
  private int groupPrefix;
  private boolean socket; // doppio.http=socket
  private final Map<String, Http1> conns = new HashMap<>(); // origin -> this thread's connection
  private Routes myRoutes;
  private String authorization; // Security.authorization(), read once

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String[] urls = p.getProperty("doppio.urls", "http://127.0.0.1:8080").split(",");
    String db = p.getProperty("doppio.db", "ycsb");
    String table = p.getProperty("doppio.table", "usertable");
    groupPrefix = Integer.parseInt(p.getProperty("doppio.groupprefix", "7"));
    int i = THREADS.getAndIncrement();
    String url = urls[i % urls.length].trim();
    if (url.endsWith("/")) {
      url = url.substring(0, url.length() - 1);
    }
    URI u = URI.create(url);
    origin = u.getScheme() + "://" + u.getRawAuthority();
    base = "/" + db + "/" + table + "/";
    String routing = p.getProperty("doppio.routing", "node");
    if (!routing.equals("node") && !routing.equals("smart")) {
      throw new DBException("doppio.routing must be node or smart, not " + routing);
    }
    String mode = p.getProperty("doppio.http", "jdk");
    if (!mode.equals("jdk") && !mode.equals("socket")) {
      throw new DBException("doppio.http must be jdk or socket, not " + mode);
    }
    socket = mode.equals("socket");
    try {
      Security.configure(p);
      authorization = Security.authorization();
    } catch (IOException | java.security.GeneralSecurityException e) {
      throw new DBException("doppio.cafile: " + e.getMessage(), e);
    }
    synchronized (LOCK) {
      if (routing.equals("smart") && !routesFetched) {
        String first = urls[0].trim();
        URI f = URI.create(first);
        // A cluster just started may still be moving leaders to their preferred nodes: wait
        // (up to 30 s) until /_cluster names a leader for every partition.
        long deadline = System.nanoTime() + 30_000_000_000L;
        IOException last = null;
        while (true) {
          try {
            routes = Routes.fetch(f.getScheme() + "://" + f.getRawAuthority(), db);
            last = null;
          } catch (IOException e) {
            last = e;
          }
          if (routes != null || System.nanoTime() > deadline) {
            break;
          }
          try {
            Thread.sleep(200);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DBException("doppio.routing=smart: interrupted while waiting for leaders", e);
          }
        }
        if (last != null) {
          throw new DBException("doppio.routing=smart: " + last.getMessage(), last);
        }
        if (routes == null) {
          throw new DBException("doppio.routing=smart: a partition of " + db + " has no known leader in /_cluster after 30 s");
        }
        routesFetched = true;
      }
      myRoutes = routes;
      if (http == null) {
        HttpClient.Builder hb = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10));
        if (Security.tls() != null) {
          hb.sslContext(Security.tls());
        }
        http = hb.build();
      }
    }
  }

  String group(String key) {
    return key.length() <= groupPrefix ? key : key.substring(0, groupPrefix);
  }

  private String docPath(String key) {
    return base + Json.pathSegment(group(key)) + "/" + Json.pathSegment(key);
  }

  @Override
  public void cleanup() {
    for (Http1 c : conns.values()) {
      c.close();
    }
  }

  /** Where requests of document group g go: its leader, or this thread's node. */
  private String originOf(String g) {
    return myRoutes != null ? myRoutes.leaderOf(g) : origin;
  }

  /** Sends a request for target (a path and query) to the node at to. */
  private Http1.Response send(String to, String method, String target, byte[] body) throws IOException, InterruptedException {
    if (socket) {
      Http1 c = conns.get(to);
      if (c == null) {
        c = new Http1(URI.create(to));
        conns.put(to, c);
      }
      return c.send(method, target, body);
    }
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(to + target));
    if (authorization != null) {
      b.header("Authorization", authorization);
    }
    if (body != null) {
      b.header("Content-Type", "application/json").method(method, HttpRequest.BodyPublishers.ofByteArray(body));
    } else {
      b.method(method, HttpRequest.BodyPublishers.noBody());
    }
    HttpResponse<byte[]> resp = http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    return new Http1.Response(resp.statusCode(), resp.body());
  }

  private static Status status(int code) {
    if (code >= 200 && code < 300) {
      return Status.OK;
    }
    if (code == 404) {
      return Status.NOT_FOUND;
    }
    if (code == 503 || code == 429) {
      return Status.SERVICE_UNAVAILABLE;
    }
    return Status.ERROR;
  }

  private static String fieldsParam(Set<String> fields) {
    if (fields == null || fields.isEmpty()) {
      return "";
    }
    return "fields=" + String.join(",", fields);
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    String f = fieldsParam(fields);
    String uri = docPath(key) + (f.isEmpty() ? "" : "?" + f);
    try {
      Http1.Response resp = send(originOf(group(key)), "GET", uri, null);
      if (resp.status() != 200) {
        return status(resp.status());
      }
      try (JsonParser jp = Json.FACTORY.createParser(resp.body())) {
        if (jp.nextToken() != JsonToken.START_OBJECT) {
          return Status.UNEXPECTED_STATE;
        }
        Json.readFields(jp, result);
      }
      return Status.OK;
    } catch (IOException e) {
      return Status.ERROR;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    String f = fieldsParam(fields);
    String group = group(startkey);
    byte[] before = Keys.tupleBefore(group, startkey);
    String cursor = before == null ? null
        : Base64.getUrlEncoder().withoutPadding().encodeToString(before);
    try {
      // At most a few following groups: YCSB scans are short (at most 100
      // records) and groups hold about records/900 each.
      for (int hop = 0; hop < 10 && group != null && result.size() < recordcount; hop++) {
        while (result.size() < recordcount) {
          StringBuilder uri = new StringBuilder(base).append(Json.pathSegment(group))
              .append("?limit=").append(recordcount - result.size());
          if (cursor != null) {
            uri.append("&cursor=").append(cursor);
          }
          if (!f.isEmpty()) {
            uri.append('&').append(f);
          }
          Http1.Response resp = send(originOf(group), "GET", uri.toString(), null);
          if (resp.status() != 200) {
            return status(resp.status());
          }
          String next = Json.readList(resp.body(), result);
          if (next == null) {
            break;
          }
          cursor = next;
        }
        group = Keys.nextGroup(group, groupPrefix);
        cursor = null;
      }
      return Status.OK;
    } catch (IOException e) {
      return Status.ERROR;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return write(key, "PATCH", Json.patchSet(values));
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    return write(key, "PUT", Json.object(values));
  }

  @Override
  public Status delete(String table, String key) {
    return write(key, "DELETE", null);
  }

  private Status write(String key, String method, byte[] body) {
    try {
      return status(send(originOf(group(key)), method, docPath(key), body).status());
    } catch (IOException e) {
      return Status.ERROR;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Status.ERROR;
    }
  }

  /** Doppio's tuple key encoding (internal/keys), as far as the scan cursor needs it. */
  static final class Keys {
    private Keys() {}

    static void appendString(java.io.ByteArrayOutputStream out, String s) {
      out.write(0x02);
      for (byte c : s.getBytes(StandardCharsets.UTF_8)) {
        out.write(c);
        if (c == 0) {
          out.write(0xFF);
        }
      }
      out.write(0x00);
      out.write(0x01);
    }

    /**
     * The encoding of a key (group, k') that sorts just before (group, key) with no YCSB key in
     * between: the key with its last byte decremented and 0xFF bytes appended (YCSB keys are
     * ASCII, so no key sorts between). The empty or NUL-ending key has no such predecessor; then
     * the cursor starts at the group's first key.
     */
    static byte[] tupleBefore(String group, String key) {
      java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(64);
      byte[] k = key.getBytes(StandardCharsets.UTF_8);
      if (k.length == 0 || k[k.length - 1] == 0) {
        return null;
      }
      appendString(out, group);
      out.write(0x02);
      for (int i = 0; i < k.length - 1; i++) {
        out.write(k[i]);
        if (k[i] == 0) {
          out.write(0xFF);
        }
      }
      out.write((k[k.length - 1] & 0xFF) - 1);
      for (int i = 0; i < 8; i++) {
        out.write(0xFF);
      }
      out.write(0x00);
      out.write(0x01);
      return out.toByteArray();
    }

    /**
     * The group following a full-length group of "user" and digits in key order, e.g. user123 ->
     * user124, user129 -> user130; null after the last one or for any other shape. (A key
     * shorter than the prefix is its own group and is skipped by a scan crossing groups; YCSB's
     * hashed keys are 18-19 digits.)
     */
    static String nextGroup(String group, int prefix) {
      if (group.length() != prefix) {
        return null;
      }
      char[] c = group.toCharArray();
      for (int i = c.length - 1; i >= 0; i--) {
        if (c[i] < '0' || c[i] > '9') {
          return null;
        }
        if (c[i] < '9') {
          c[i]++;
          return new String(c);
        }
        c[i] = '0';
      }
      return null;
    }
  }
}
