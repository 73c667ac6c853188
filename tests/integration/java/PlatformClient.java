// A casino platform on the JVM, written from docs/kafka.md and the AsyncAPI document alone:
// Apache Kafka's own Java client (kafka-clients, the broker's version) and Jackson, both from
// the broker's libs directory. It sends a table's commands (keyed by the stream id, with the
// CloudEvents headers of a command, compressed with each codec given), reads
// blackjack.command-results and blackjack.events with isolation.level=read_committed, and
// checks what it reads against the contract. Exit 0 and one JSON line on stdout when every
// check holds; 1 and the check that failed on stderr otherwise.
//
// javac -cp "$KAFKA_CACHE_DIR/libs/*" -d out PlatformClient.java
// java -cp "out:$KAFKA_CACHE_DIR/libs/*" PlatformClient BOOTSTRAP PREFIX RUN_ID lz4 zstd

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class PlatformClient {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Duration WAIT = Duration.ofSeconds(60);

  /** A command sent: its id, stream, the partition and offset the broker gave it. */
  record Sent(String id, String stream, String type, int partition, long offset) {}

  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.err.println("usage: PlatformClient BOOTSTRAP PREFIX RUN_ID CODEC...");
      System.exit(2);
    }
    String bootstrap = args[0];
    String prefix = args[1];
    String run = args[2];
    List<Sent> sent = new ArrayList<>();
    Map<String, String> tables = new LinkedHashMap<>(); // stream -> codec
    for (int i = 3; i < args.length; i++) {
      String codec = args[i];
      String table = "java-" + codec + "-" + run;
      tables.put(table, codec);
      sent.addAll(playRound(bootstrap, prefix, table, codec));
    }
    Map<String, Integer> counts = readAndCheck(bootstrap, prefix, sent, tables.keySet());
    ObjectNode summary = JSON.createObjectNode();
    summary.put("commands", sent.size());
    summary.put("results", counts.get("results"));
    summary.put("events", counts.get("events"));
    summary.putPOJO("tables", tables);
    System.out.println(JSON.writeValueAsString(summary));
  }

  // ---- sending ------------------------------------------------------------------------------

  static ObjectNode command(String type) {
    ObjectNode body = JSON.createObjectNode();
    body.put("type", type);
    return body;
  }

  /** A round of mini-h17 at a table of its own, sent in one compressed producer batch. */
  static List<Sent> playRound(String bootstrap, String prefix, String table, String codec)
      throws Exception {
    List<ObjectNode> commands = new ArrayList<>();
    commands.add(command("OpenTable").put("variant", "mini-h17"));
    commands.add(command("SitDown").put("player_id", "alice"));
    commands.add(command("Deposit").put("player_id", "alice").put("amount", 10_000));
    // refused: an amount of 0 (invalid_amount), and nothing changes
    commands.add(command("PlaceBet").put("player_id", "alice").put("box", 0).put("amount", 0));
    commands.add(command("PlaceBet").put("player_id", "alice").put("box", 0).put("amount", 500));
    commands.add(command("Deal").put("player_id", "alice"));
    // refused malformed: a sent_at written by OffsetDateTime.toString() at a whole minute,
    // "2026-12-03T14:35Z", has no seconds, which RFC 3339 requires (docs/kafka.md)
    commands.add(command("SitDown").put("player_id", "bob"));

    Properties config = new Properties();
    config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
    config.put(ProducerConfig.ACKS_CONFIG, "all");
    config.put(ProducerConfig.LINGER_MS_CONFIG, "1000"); // the round's commands in one batch
    config.put(ProducerConfig.CLIENT_ID_CONFIG, "platform-" + codec);
    List<Sent> sent = new ArrayList<>();
    String topic = prefix + "blackjack.commands";
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
      List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
      List<String[]> ids = new ArrayList<>();
      for (ObjectNode body : commands) {
        String id = UUID.randomUUID().toString();
        ObjectNode envelope = JSON.createObjectNode();
        envelope.put("command_id", id);
        envelope.put("stream_id", table);
        envelope.put("correlation_id", "java-session-" + codec);
        // Instant.toString() is RFC 3339 (ISO_INSTANT: seconds always written)
        String type = body.get("type").asText();
        boolean noSeconds = type.equals("SitDown") && body.get("player_id").asText().equals("bob");
        envelope.put("sent_at", noSeconds
            ? OffsetDateTime.of(2026, 12, 3, 14, 35, 0, 0, ZoneOffset.UTC).toString()
            : Instant.now().toString());
        envelope.set("command", body);
        ProducerRecord<String, String> record =
            new ProducerRecord<>(topic, table, JSON.writeValueAsString(envelope));
        Headers headers = record.headers();
        header(headers, "ce_specversion", "1.0");
        header(headers, "ce_id", id);
        header(headers, "ce_source", "/casino-platform/java");
        header(headers, "ce_type", "blackjack.command." + type);
        header(headers, "ce_time", Instant.now().toString());
        header(headers, "ce_subject", table);
        header(headers, "ce_correlationid", "java-session-" + codec);
        header(headers, "content-type", "application/json");
        futures.add(producer.send(record));
        ids.add(new String[] {id, type});
        if (body.has("amount") && body.get("amount").asLong() == 0) {
          ZERO_BETS.add(id);
        }
        if (noSeconds) {
          NO_SECONDS.add(id);
        }
      }
      producer.flush();
      for (int i = 0; i < futures.size(); i++) {
        RecordMetadata metadata = futures.get(i).get();
        sent.add(new Sent(ids.get(i)[0], table, ids.get(i)[1], metadata.partition(),
            metadata.offset()));
      }
    }
    return sent;
  }

  static void header(Headers headers, String name, String value) {
    headers.add(name, value.getBytes(StandardCharsets.UTF_8));
  }

  // ---- reading ------------------------------------------------------------------------------

  static String header(ConsumerRecord<String, String> record, String name) {
    Header last = record.headers().lastHeader(name);
    return last == null ? null : new String(last.value(), StandardCharsets.UTF_8);
  }

  static void check(boolean holds, String what) {
    if (!holds) {
      throw new AssertionError(what);
    }
  }

  static Map<String, Integer> readAndCheck(
      String bootstrap, String prefix, List<Sent> sent, Set<String> tables) throws Exception {
    String results = prefix + "blackjack.command-results";
    String events = prefix + "blackjack.events";
    Properties config = new Properties();
    config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"); // not Java's default
    config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    Map<String, ConsumerRecord<String, String>> answers = new HashMap<>();
    Map<String, TreeMap<Long, ConsumerRecord<String, String>>> streams = new HashMap<>();
    Map<String, Sent> byId = new HashMap<>();
    for (Sent command : sent) {
      byId.put(command.id(), command);
    }
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (String topic : List.of(results, events)) {
        for (PartitionInfo info : consumer.partitionsFor(topic)) {
          partitions.add(new TopicPartition(topic, info.partition()));
        }
      }
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      Instant deadline = Instant.now().plus(WAIT);
      while (!done(answers, streams, sent, tables)) {
        check(Instant.now().isBefore(deadline), "not every result and event came in " + WAIT
            + ": results " + answers.keySet() + ", events " + streams.keySet());
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
          if (record.topic().equals(results)) {
            String id = JSON.readTree(record.value()).get("command_id").asText();
            if (byId.containsKey(id)) {
              answers.put(id, record);
            }
          } else if (tables.contains(record.key())) {
            long sequence = JSON.readTree(record.value()).get("sequence").asLong();
            ConsumerRecord<String, String> before =
                streams.computeIfAbsent(record.key(), k -> new TreeMap<>()).put(sequence, record);
            check(before == null, record.key() + " sequence " + sequence + " read twice");
          }
        }
      }
    }
    for (Sent command : sent) {
      checkResult(command, answers.get(command.id()));
    }
    int eventCount = 0;
    for (String table : tables) {
      eventCount += checkEvents(table, streams.get(table), sent, answers);
    }
    return Map.of("results", answers.size(), "events", eventCount);
  }

  /** Every command answered, and each table's events read up to its Deal's last sequence. */
  static boolean done(
      Map<String, ConsumerRecord<String, String>> answers,
      Map<String, TreeMap<Long, ConsumerRecord<String, String>>> streams,
      List<Sent> sent,
      Set<String> tables) throws Exception {
    for (Sent command : sent) {
      if (!answers.containsKey(command.id())) {
        return false;
      }
    }
    for (String table : tables) {
      long last = 0;
      for (Sent command : sent) {
        JsonNode result = JSON.readTree(answers.get(command.id()).value());
        if (command.stream().equals(table) && result.hasNonNull("last_sequence")) {
          last = Math.max(last, result.get("last_sequence").asLong());
        }
      }
      TreeMap<Long, ConsumerRecord<String, String>> read = streams.get(table);
      if (last == 0 || read == null || read.size() < last) {
        return false;
      }
    }
    return true;
  }

  /** A result's ce_id: "result/" and the first 32 hex digits of its body's SHA-256. */
  static String resultId(String body) throws Exception {
    byte[] digest =
        MessageDigest.getInstance("SHA-256").digest(body.getBytes(StandardCharsets.UTF_8));
    return "result/" + HexFormat.of().formatHex(digest).substring(0, 32);
  }

  static void checkResult(Sent command, ConsumerRecord<String, String> record) throws Exception {
    String at = command.type() + " " + command.id() + ": ";
    JsonNode result = JSON.readTree(record.value());
    check(command.stream().equals(record.key()), at + "result keyed " + record.key());
    check(record.partition() == command.partition(),
        at + "result on partition " + record.partition() + ", command on " + command.partition());
    check(String.valueOf(command.offset()).equals(header(record, "bj_command_offset")),
        at + "bj_command_offset " + header(record, "bj_command_offset")
            + ", the command's offset " + command.offset());
    check(resultId(record.value()).equals(header(record, "ce_id")),
        at + "ce_id " + header(record, "ce_id"));
    check("1.0".equals(header(record, "ce_specversion")), at + "ce_specversion");
    check("blackjack.CommandResult.v1".equals(header(record, "ce_type")), at + "ce_type");
    check(command.id().equals(header(record, "ce_causationid")), at + "ce_causationid");
    check(command.stream().equals(header(record, "ce_subject")), at + "ce_subject");
    check("application/json".equals(header(record, "content-type")), at + "content-type");
    check(Instant.parse(result.get("handled_at").asText()) != null, at + "handled_at");
    // the body's times end in Z, ce_time in +00:00: Java 17's Instant.parse reads both
    check(Instant.parse(header(record, "ce_time")) != null, at + "ce_time");
    check(("java-session-" + tableCodec(command.stream())).equals(
        result.get("correlation_id").asText()), at + "correlation_id");
    boolean zeroBet = command.type().equals("PlaceBet") && refusedAmount(command);
    if (NO_SECONDS.contains(command.id())) {
      check("rejected".equals(result.get("status").asText()), at + "sent_at without seconds");
      check("malformed".equals(result.get("rejection").get("code").asText()),
          at + "sent_at without seconds refused " + result.get("rejection"));
    } else if (zeroBet) {
      check("rejected".equals(result.get("status").asText()), at + "a bet of 0 accepted");
      check("invalid_amount".equals(result.get("rejection").get("code").asText()),
          at + "a bet of 0 refused " + result.get("rejection"));
    } else {
      check("accepted".equals(result.get("status").asText()), at + "refused: " + result);
    }
  }

  /** The ids of the bets of 0 sent (refused ``invalid_amount``). */
  static final Set<String> ZERO_BETS = new java.util.HashSet<>();

  /** The ids of the commands whose sent_at has no seconds (refused ``malformed``). */
  static final Set<String> NO_SECONDS = new java.util.HashSet<>();

  static boolean refusedAmount(Sent command) {
    return ZERO_BETS.contains(command.id());
  }

  static String tableCodec(String table) {
    return table.split("-")[1];
  }

  static int checkEvents(
      String table,
      TreeMap<Long, ConsumerRecord<String, String>> read,
      List<Sent> sent,
      Map<String, ConsumerRecord<String, String>> answers) throws Exception {
    Map<String, String> causes = new HashMap<>();
    long expected = 1;
    List<String> types = new ArrayList<>();
    for (Map.Entry<Long, ConsumerRecord<String, String>> entry : read.entrySet()) {
      ConsumerRecord<String, String> record = entry.getValue();
      JsonNode event = JSON.readTree(record.value());
      String at = table + " event " + entry.getKey() + ": ";
      check(entry.getKey() == expected++, at + "sequences not 1, 2, 3...");
      String type = event.get("type").asText();
      types.add(type);
      check(table.equals(event.get("stream_id").asText()), at + "stream_id");
      check(("blackjack." + type + ".v" + event.get("schema_version").asInt())
          .equals(header(record, "ce_type")), at + "ce_type " + header(record, "ce_type"));
      check(String.valueOf(entry.getKey()).equals(header(record, "ce_sequence")),
          at + "ce_sequence");
      check(event.get("event_id").asText().equals(header(record, "ce_id")), at + "ce_id");
      check(table.equals(header(record, "ce_subject")), at + "ce_subject");
      check(Instant.parse(header(record, "ce_time")) != null, at + "ce_time");
      check(Instant.parse(event.get("occurred_at").asText()) != null, at + "occurred_at");
      check("1.0".equals(header(record, "ce_specversion")), at + "ce_specversion");
      check("application/json".equals(header(record, "content-type")), at + "content-type");
      check(event.get("causation_id").asText().equals(header(record, "ce_causationid")),
          at + "ce_causationid");
      check(("java-session-" + tableCodec(table)).equals(header(record, "ce_correlationid")),
          at + "ce_correlationid " + header(record, "ce_correlationid"));
      causes.put(event.get("causation_id").asText(), type);
    }
    for (String type : List.of(
        "TableOpened", "SeatTaken", "FundsDeposited", "BetPlaced", "CardDealt")) {
      check(types.contains(type), table + ": no " + type + " in " + types);
    }
    // each accepted command's result names the sequences of the events it caused
    for (Sent command : sent) {
      if (!command.stream().equals(table)) {
        continue;
      }
      JsonNode result = JSON.readTree(answers.get(command.id()).value());
      if (result.hasNonNull("first_sequence")) {
        for (long s = result.get("first_sequence").asLong();
            s <= result.get("last_sequence").asLong(); s++) {
          String cause = JSON.readTree(read.get(s).value()).get("causation_id").asText();
          check(command.id().equals(cause), table + " event " + s + " caused by " + cause
              + ", its result says " + command.id());
        }
      } else {
        check(!causes.containsKey(command.id()), table + ": events of a refused command");
      }
    }
    return read.size();
  }
}
