package org.doppio.ycsb;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * A YCSB binding storing each record as one JSON document in a SQL table
 * {@code usertable(ycsb_key varchar(255) primary key, doc <json type>)}: reads project the asked
 * fields in SQL, update merges the new fields into the stored document in SQL (a partial update,
 * as Doppio's PATCH), insert writes the whole document, scan is a primary-key range in key order.
 * Every statement commits on its own (autocommit), one connection per YCSB thread. The two
 * dialects are {@link PostgresClient} (JSONB) and {@link MariaDBClient} (JSON, InnoDB).
 */
public abstract class JdbcJsonClient extends DB {
  private static final Object LOCK = new Object();
  private static boolean created;

  private Connection conn;
  private final Map<String, PreparedStatement> stmts = new HashMap<>();

  /** The statements creating the table, run once per process when jdbc.create is true. */
  protected abstract String[] createTable();

  /** SQL selecting field f of the document as text. */
  protected abstract String field(String f);

  /** SQL selecting the whole document as JSON text. */
  protected abstract String wholeDoc();

  /** SQL of the update merging the JSON object parameter 1 into the document of key parameter 2. */
  protected abstract String updateSQL();

  protected abstract String insertSQL();

  protected abstract String defaultURL();

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    try {
      conn = DriverManager.getConnection(p.getProperty("jdbc.url", defaultURL()),
          p.getProperty("jdbc.user", ""), p.getProperty("jdbc.password", ""));
      conn.setAutoCommit(true);
      if (Boolean.parseBoolean(p.getProperty("jdbc.create", "false"))) {
        synchronized (LOCK) {
          if (!created) {
            try (Statement s = conn.createStatement()) {
              for (String q : createTable()) {
                s.execute(q);
              }
            }
            created = true;
          }
        }
      }
    } catch (SQLException e) {
      throw new DBException(e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    try {
      for (PreparedStatement s : stmts.values()) {
        s.close();
      }
      conn.close();
    } catch (SQLException e) {
      throw new DBException(e);
    }
  }

  private PreparedStatement stmt(String sql) throws SQLException {
    PreparedStatement s = stmts.get(sql);
    if (s == null) {
      s = conn.prepareStatement(sql);
      stmts.put(sql, s);
    }
    return s;
  }

  private String projection(Set<String> fields, List<String> names) {
    if (fields == null || fields.isEmpty()) {
      return wholeDoc();
    }
    StringBuilder b = new StringBuilder();
    for (String f : fields) {
      if (!f.matches("[A-Za-z0-9_]+")) {
        throw new IllegalArgumentException("field name " + f);
      }
      if (b.length() > 0) {
        b.append(", ");
      }
      b.append(field(f));
      names.add(f);
    }
    return b.toString();
  }

  private static void row(ResultSet rs, List<String> names, Map<String, ByteIterator> out) throws SQLException, IOException {
    if (names.isEmpty()) {
      try (JsonParser jp = Json.FACTORY.createParser(rs.getString(1))) {
        if (jp.nextToken() != JsonToken.START_OBJECT) {
          throw new IOException("document is not an object");
        }
        Json.readFields(jp, out);
      }
      return;
    }
    for (int i = 0; i < names.size(); i++) {
      String v = rs.getString(i + 1);
      if (v != null) {
        out.put(names.get(i), new StringByteIterator(v));
      }
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    List<String> names = new ArrayList<>();
    String sql = "SELECT " + projection(fields, names) + " FROM usertable WHERE ycsb_key = ?";
    try {
      PreparedStatement s = stmt(sql);
      s.setString(1, key);
      try (ResultSet rs = s.executeQuery()) {
        if (!rs.next()) {
          return Status.NOT_FOUND;
        }
        row(rs, names, result);
      }
      return Status.OK;
    } catch (SQLException | IOException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    List<String> names = new ArrayList<>();
    String sql = "SELECT " + projection(fields, names)
        + " FROM usertable WHERE ycsb_key >= ? ORDER BY ycsb_key LIMIT ?";
    try {
      PreparedStatement s = stmt(sql);
      s.setString(1, startkey);
      s.setInt(2, recordcount);
      try (ResultSet rs = s.executeQuery()) {
        while (rs.next()) {
          HashMap<String, ByteIterator> rec = new HashMap<>();
          row(rs, names, rec);
          result.add(rec);
        }
      }
      return Status.OK;
    } catch (SQLException | IOException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      PreparedStatement s = stmt(updateSQL());
      s.setString(1, new String(Json.object(values), java.nio.charset.StandardCharsets.UTF_8));
      s.setString(2, key);
      return s.executeUpdate() == 1 ? Status.OK : Status.NOT_FOUND;
    } catch (SQLException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      PreparedStatement s = stmt(insertSQL());
      s.setString(1, key);
      s.setString(2, new String(Json.object(values), java.nio.charset.StandardCharsets.UTF_8));
      s.executeUpdate();
      return Status.OK;
    } catch (SQLException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      PreparedStatement s = stmt("DELETE FROM usertable WHERE ycsb_key = ?");
      s.setString(1, key);
      return s.executeUpdate() == 1 ? Status.OK : Status.NOT_FOUND;
    } catch (SQLException e) {
      return Status.ERROR;
    }
  }
}
