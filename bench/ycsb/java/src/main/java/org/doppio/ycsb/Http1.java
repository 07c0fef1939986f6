package org.doppio.ycsb;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;

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
  private Socket socket;
  private InputStream in;
  private OutputStream out;

  Http1(URI base) {
    host = base.getHost();
    port = base.getPort() > 0 ? base.getPort() : 80;
    hostHeader = host + ":" + port;
  }

  private void connect() throws IOException {
    Socket s = new Socket();
    s.setTcpNoDelay(true);
    s.connect(new InetSocketAddress(host, port), 10_000);
    s.setSoTimeout(120_000);
    socket = s;
    in = new BufferedInputStream(s.getInputStream(), 16 << 10);
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

    String status = line();
    if (!status.startsWith("HTTP/1.1 ") || status.length() < 12) {
      throw new IOException("bad status line: " + status);
    }
    int code = Integer.parseInt(status.substring(9, 12));
    long length = -1;
    boolean chunked = false;
    boolean closeAfter = false;
    for (String l = line(); !l.isEmpty(); l = line()) {
      int colon = l.indexOf(':');
      if (colon < 0) {
        continue;
      }
      String name = l.substring(0, colon).trim();
      String value = l.substring(colon + 1).trim();
      if (name.equalsIgnoreCase("Content-Length")) {
        length = Long.parseLong(value);
      } else if (name.equalsIgnoreCase("Transfer-Encoding")) {
        chunked = value.equalsIgnoreCase("chunked");
      } else if (name.equalsIgnoreCase("Connection")) {
        closeAfter = value.equalsIgnoreCase("close");
      }
    }
    byte[] payload;
    if (method.equals("HEAD") || code == 204 || code == 304 || code / 100 == 1) {
      payload = new byte[0];
    } else if (chunked) {
      payload = readChunked();
    } else if (length >= 0) {
      payload = readN((int) length);
    } else {
      payload = in.readAllBytes();
      closeAfter = true;
    }
    if (closeAfter) {
      close();
    }
    return new Response(code, payload);
  }

  private String line() throws IOException {
    StringBuilder b = new StringBuilder(64);
    for (;;) {
      int c = in.read();
      if (c < 0) {
        throw new EOFException("connection closed");
      }
      if (c == '\n') {
        int n = b.length();
        if (n > 0 && b.charAt(n - 1) == '\r') {
          b.setLength(n - 1);
        }
        return b.toString();
      }
      b.append((char) c);
    }
  }

  private byte[] readN(int n) throws IOException {
    byte[] b = new byte[n];
    int off = 0;
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
