package org.doppio.ycsb;

/** PostgreSQL: the document is JSONB; update is {@code doc || patch}. */
public class PostgresClient extends JdbcJsonClient {
  @Override
  protected String[] createTable() {
    return new String[] {
        "CREATE TABLE IF NOT EXISTS usertable (ycsb_key varchar(255) PRIMARY KEY, doc jsonb NOT NULL)"};
  }

  @Override
  protected String field(String f) {
    return "doc->>'" + f + "'";
  }

  @Override
  protected String wholeDoc() {
    return "doc::text";
  }

  @Override
  protected String updateSQL() {
    return "UPDATE usertable SET doc = doc || ?::jsonb WHERE ycsb_key = ?";
  }

  @Override
  protected String insertSQL() {
    return "INSERT INTO usertable (ycsb_key, doc) VALUES (?, ?::jsonb)";
  }

  @Override
  protected String defaultURL() {
    return "jdbc:postgresql://127.0.0.1:5432/postgres";
  }
}
