package org.doppio.ycsb;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Properties;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * A secure cluster's client settings, read once from the binding's properties: {@code
 * doppio.cafile} (the cluster CA's PEM certificate; set, the binding speaks HTTPS and verifies
 * the nodes' certificates and host names) and {@code doppio.authorization} (the Authorization
 * header every request carries, e.g. a session token's "Bearer ...").
 */
final class Security {
  private static boolean configured;
  private static SSLContext tls;
  private static String authorization;

  private Security() {}

  static synchronized void configure(Properties p) throws IOException, GeneralSecurityException {
    if (configured) {
      return;
    }
    String ca = p.getProperty("doppio.cafile", "");
    if (!ca.isEmpty()) {
      KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
      trust.load(null, null);
      try (InputStream in = Files.newInputStream(Path.of(ca))) {
        int i = 0;
        for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
          trust.setCertificateEntry("ca" + i++, c);
        }
      }
      TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(trust);
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(null, tmf.getTrustManagers(), null);
      tls = ctx;
    }
    String a = p.getProperty("doppio.authorization", "");
    authorization = a.isEmpty() ? null : a;
    configured = true;
  }

  /** The TLS context for https origins, or null when the cluster is not secure. */
  static synchronized SSLContext tls() {
    return tls;
  }

  /** The Authorization header's value, or null. */
  static synchronized String authorization() {
    return authorization;
  }

  /** The scheme of the cluster's origins. */
  static synchronized String scheme() {
    return tls != null ? "https" : "http";
  }
}
