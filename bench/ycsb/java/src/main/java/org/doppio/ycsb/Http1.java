package org.doppio.ycsb;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * A blocking HTTP/1.1 client on one keep-alive connection, for one YCSB thread: the same shape
 * as a JDBC connection (one socket per thread, a request then its answer), without
 * java.net.http's asynchronous machinery. It speaks only what the binding needs: a request with
 * an optional body; an answer with Content-Length, chunked or no body.
 */
final class Http1 {
  /** An answer: status and body. */
  record Response(int status, byte[] body) {}

  private final String host;
  private final int port;
  private final String hostHeader;
  private final SSLContext tls; // https: Security.tls(); http: null
  private final String authorization; // the Authorization header's value, or null
  private Socket socket;
  private InputStream in; // the socket's, unbuffered: buf is the buffer
  private OutputStream out;
  // Bytes read and not yet consumed are buf[pos:lim]. Parsing the answer in this buffer,
  // rather than a byte at a time through BufferedInputStream's synchronized read(), costs the
  // client about 5 µs less CPU per request (a lock per byte of headers otherwise).
  private byte[] buf = new byte[16 << 10];
  private int pos;
  private int lim;

  Http1(URI base) {
    host = base.getHost();
    tls = base.getScheme().equals("https") ? Security.tls() : null;
    if (base.getScheme().equals("https") && tls == null) {
      throw new IllegalArgumentException(base + ": https needs doppio.cafile");
    }
    port = base.getPort() > 0 ? base.getPort() : tls != null ? 443 : 80;
    hostHeader = host + ":" + port;
    authorization = Security.authorization();
  }

  private void connect() throws IOException {
    Socket s = new Socket();
    s.setTcpNoDelay(true);
    s.connect(new InetSocketAddress(host, port), 10_000);
    s.setSoTimeout(120_000);
    if (tls != null) {
      SSLSocket ss = (SSLSocket) tls.getSocketFactory().createSocket(s, host, port, true);
      SSLParameters params = ss.getSSLParameters();
      params.setEndpointIdentificationAlgorithm("HTTPS"); // verify the node's host name or IP
      params.setApplicationProtocols(new String[] {"http/1.1"});
      ss.setSSLParameters(params);
      ss.startHandshake();
      s = ss;
    }
    socket = s;
    in = s.getInputStream();
    pos = 0;
    lim = 0;
    out = s.getOutputStream();
  }

  void close() {
    if (socket != null) {
      try {
        socket.close();
      } catch (IOException e) {
        // closing anyway
      }
      socket = null;
    }
  }

  /**
   * Sends the request. A connection the server closed while idle fails on its first use; then
   * the request is sent again once on a new connection (every request of the binding is
   * idempotent: reads, PUT, PATCH $set, DELETE).
   */
  Response send(String method, String target, byte[] body) throws IOException {
    boolean reused = socket != null;
    if (!reused) {
      connect();
    }
    try {
      return exchange(method, target, body);
    } catch (IOException e) {
      close();
      if (!reused) {
        throw e;
      }
      connect();
      try {
        return exchange(method, target, body);
      } catch (IOException e2) {
        close();
        throw e2;
      }
    }
  }

  private Response exchange(String method, String target, byte[] body) throws IOException {
    StringBuilder h = new StringBuilder(128).append(method).append(' ').append(target)
        .append(" HTTP/1.1\r\nHost: ").append(hostHeader).append("\r\n");
    if (authorization != null) {
      h.append("Authorization: ").append(authorization).append("\r\n");
    }
    if (body != null) {
      h.append("Content-Type: application/json\r\nContent-Length: ").append(body.length).append("\r\n");
    }
    h.append("\r\n");
    byte[] head = h.toString().getBytes(StandardCharsets.US_ASCII);
    if (body != null && head.length + body.length <= 8192) {
      byte[] all = new byte[head.length + body.length];
      System.arraycopy(head, 0, all, 0, head.length);
      System.arraycopy(body, 0, all, head.length, body.length);
      out.write(all);
    } else {
      out.write(head);
      if (body != null) {
        out.write(body);
      }
    }
    out.flush();

    int lineEnd = lineEnd();
    if (lineEnd - pos < 12 || !startsWith("HTTP/1.1 ")) {
      throw new IOException("bad status line: " + new String(buf, pos, lineEnd - pos, StandardCharsets.ISO_8859_1));
    }
    int code = (buf[pos + 9] - '0') * 100 + (buf[pos + 10] - '0') * 10 + (buf[pos + 11] - '0');
    pos = lineEnd + 1;
    long length = -1;
    boolean chunked = false;
    boolean closeAfter = false;
    for (;;) {
      lineEnd = lineEnd();
      int end = lineEnd > pos && buf[lineEnd - 1] == '\r' ? lineEnd - 1 : lineEnd;
      if (end == pos) {
        pos = lineEnd + 1;
        break;
      }
      if (headerIs("content-length:", end)) {
        length = Long.parseLong(value("content-length:", end));
      } else if (headerIs("transfer-encoding:", end)) {
        chunked = value("transfer-encoding:", end).equalsIgnoreCase("chunked");
      } else if (headerIs("connection:", end)) {
        closeAfter = value("connection:", end).equalsIgnoreCase("close");
      }
      pos = lineEnd + 1;
    }
    byte[] payload;
    if (method.equals("HEAD") || code == 204 || code == 304 || code / 100 == 1) {
      payload = new byte[0];
    } else if (chunked) {
      payload = readChunked();
    } else if (length >= 0) {
      payload = readN((int) length);
    } else {
      ByteArrayOutputStream rest = new ByteArrayOutputStream();
      rest.write(buf, pos, lim - pos);
      pos = lim;
      rest.write(in.readAllBytes());
      payload = rest.toByteArray();
      closeAfter = true;
    }
    if (closeAfter) {
      close();
    }
    return new Response(code, payload);
  }

  /**
   * The index of the next '\n' at or after pos, reading more into the buffer as needed (moving
   * the unread bytes to its start, growing it for a line longer than the buffer).
   */
  private int lineEnd() throws IOException {
    int scanned = pos;
    for (;;) {
      for (int i = scanned; i < lim; i++) {
        if (buf[i] == '\n') {
          return i;
        }
      }
      scanned = lim - pos;
      fill();
      scanned += pos;
    }
  }

  /** Reads more bytes after lim, keeping buf[pos:lim]; throws at end of stream. */
  private void fill() throws IOException {
    if (pos > 0) {
      System.arraycopy(buf, pos, buf, 0, lim - pos);
      lim -= pos;
      pos = 0;
    }
    if (lim == buf.length) {
      buf = java.util.Arrays.copyOf(buf, buf.length * 2);
    }
    int n = in.read(buf, lim, buf.length - lim);
    if (n < 0) {
      throw new EOFException("connection closed");
    }
    lim += n;
  }

  private boolean startsWith(String ascii) {
    for (int i = 0; i < ascii.length(); i++) {
      if (buf[pos + i] != ascii.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  /** Whether the header line buf[pos:end] is named lowerName (with its colon), in any case. */
  private boolean headerIs(String lowerName, int end) {
    int n = lowerName.length();
    if (end - pos < n) {
      return false;
    }
    for (int i = 0; i < n; i++) {
      int c = buf[pos + i];
      if (c >= 'A' && c <= 'Z') {
        c += 'a' - 'A';
      }
      if (c != lowerName.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  private String value(String lowerName, int end) {
    return new String(buf, pos + lowerName.length(), end - pos - lowerName.length(), StandardCharsets.ISO_8859_1).trim();
  }

  /** The line at pos without its CRLF; pos moves past it. */
  private String line() throws IOException {
    int lineEnd = lineEnd();
    int end = lineEnd > pos && buf[lineEnd - 1] == '\r' ? lineEnd - 1 : lineEnd;
    String l = new String(buf, pos, end - pos, StandardCharsets.ISO_8859_1);
    pos = lineEnd + 1;
    return l;
  }

  private byte[] readN(int n) throws IOException {
    byte[] b = new byte[n];
    int off = Math.min(n, lim - pos);
    System.arraycopy(buf, pos, b, 0, off);
    pos += off;
    while (off < n) {
      int r = in.read(b, off, n - off);
      if (r < 0) {
        throw new EOFException("connection closed in a body");
      }
      off += r;
    }
    return b;
  }

  private byte[] readChunked() throws IOException {
    ByteArrayOutputStream body = new ByteArrayOutputStream(4096);
    for (;;) {
      String size = line();
      int semi = size.indexOf(';');
      int n = Integer.parseInt((semi >= 0 ? size.substring(0, semi) : size).trim(), 16);
      if (n == 0) {
        while (!line().isEmpty()) {
          // trailers
        }
        return body.toByteArray();
      }
      body.write(readN(n));
      if (!line().isEmpty()) {
        throw new IOException("chunk not followed by CRLF");
      }
    }
  }
}
