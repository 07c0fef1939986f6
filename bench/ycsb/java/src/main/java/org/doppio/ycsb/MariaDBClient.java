package org.doppio.ycsb;

/** MariaDB: the document is a JSON column of an InnoDB table; update is JSON_MERGE_PATCH. */
public class MariaDBClient extends JdbcJsonClient {
  @Override
  protected String[] createTable() {
    return new String[] {
        "CREATE TABLE IF NOT EXISTS usertable (ycsb_key varchar(255) PRIMARY KEY, doc JSON NOT NULL)"
            + " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"};
  }

  @Override
  protected String field(String f) {
    return "JSON_VALUE(doc, '$." + f + "')";
  }

  @Override
  protected String wholeDoc() {
    return "doc";
  }

  @Override
  protected String updateSQL() {
    return "UPDATE usertable SET doc = JSON_MERGE_PATCH(doc, ?) WHERE ycsb_key = ?";
  }

  @Override
  protected String insertSQL() {
    return "INSERT INTO usertable (ycsb_key, doc) VALUES (?, ?)";
  }

  @Override
  protected String defaultURL() {
    return "jdbc:mariadb://127.0.0.1:3306/ycsb";
  }
}
