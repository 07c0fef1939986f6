package org.doppio.ycsb;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Vector;
import site.ycsb.ByteIterator;
import site.ycsb.StringByteIterator;

/** JSON documents of YCSB records: {"field0":"...",...}, with Jackson's streaming API. */
final class Json {
  static final JsonFactory FACTORY = new JsonFactory();

  private Json() {}

  /** A path segment: percent-encoded, a space as %20. */
  static String pathSegment(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
  }

  /** The record as a JSON object of strings. */
  static byte[] object(Map<String, ByteIterator> values) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(1200);
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      writeObject(g, values);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** {"$set": record}: a partial update of the given fields. */
  static byte[] patchSet(Map<String, ByteIterator> values) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(256);
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      g.writeStartObject();
      g.writeFieldName("$set");
      writeObject(g, values);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  private static void writeObject(JsonGenerator g, Map<String, ByteIterator> values) throws IOException {
    g.writeStartObject();
    for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
      g.writeStringField(e.getKey(), e.getValue().toString());
    }
    g.writeEndObject();
  }

  /** Reads the rest of an object whose START_OBJECT was read: string fields into result. */
  static void readFields(JsonParser jp, Map<String, ByteIterator> result) throws IOException {
    JsonToken t;
    while ((t = jp.nextToken()) == JsonToken.FIELD_NAME) {
      String name = jp.currentName();
      JsonToken v = jp.nextToken();
      if (v == JsonToken.VALUE_STRING) {
        result.put(name, new StringByteIterator(jp.getText()));
      } else if (v == JsonToken.START_OBJECT || v == JsonToken.START_ARRAY) {
        jp.skipChildren();
      } else if (v != JsonToken.VALUE_NULL) {
        result.put(name, new StringByteIterator(jp.getText()));
      }
    }
    if (t != JsonToken.END_OBJECT) {
      throw new IOException("expected the end of an object, got " + t);
    }
  }

  /**
   * Reads a Doppio document list {"documents":[{"key":[..],"document":{..}}..],"next":".."}:
   * each document's fields into a new map appended to result; answers next or null.
   */
  static String readList(byte[] body, Vector<HashMap<String, ByteIterator>> result) throws IOException {
    String next = null;
    try (JsonParser jp = FACTORY.createParser(body)) {
      if (jp.nextToken() != JsonToken.START_OBJECT) {
        throw new IOException("document list: not an object");
      }
      while (jp.nextToken() == JsonToken.FIELD_NAME) {
        String name = jp.currentName();
        JsonToken v = jp.nextToken();
        if (name.equals("next") && v == JsonToken.VALUE_STRING) {
          next = jp.getText();
        } else if (name.equals("documents") && v == JsonToken.START_ARRAY) {
          while (jp.nextToken() == JsonToken.START_OBJECT) {
            HashMap<String, ByteIterator> rec = new HashMap<>();
            while (jp.nextToken() == JsonToken.FIELD_NAME) {
              String item = jp.currentName();
              JsonToken iv = jp.nextToken();
              if (item.equals("document") && iv == JsonToken.START_OBJECT) {
                readFields(jp, rec);
              } else {
                jp.skipChildren();
              }
            }
            result.add(rec);
          }
        } else {
          jp.skipChildren();
        }
      }
    }
    return next;
  }
}
