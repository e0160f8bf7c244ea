package mysqlcdcbench;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.cdc.connectors.mysql.source.MySqlSource;
import org.apache.flink.cdc.connectors.mysql.table.StartupOptions;
import org.apache.flink.cdc.connectors.shaded.org.apache.kafka.connect.data.Struct;
import org.apache.flink.cdc.connectors.shaded.org.apache.kafka.connect.source.SourceRecord;
import org.apache.flink.cdc.debezium.DebeziumDeserializationSchema;
import org.apache.flink.cdc.debezium.JsonDebeziumDeserializationSchema;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.SinkFunction;
import org.apache.flink.util.Collector;

/**
 * Flink CDC's MySQL source reading one binlog range of one table from a given file and position, in a local
 * Flink (one JVM, parallelism 1), as bench/binlog.py measures this project's readers: the change rows it
 * delivers are counted (an update counts twice, its before and after image, as our change rows do) until the
 * expected number is reached; then one JSON line is printed and the JVM exits.
 *
 * <p>Arguments: host port user file position expected-change-rows database.table mode; the password is the
 * first line of standard input (never an argument: process listings show those). Mode {@code records}: the
 * source's own records (Debezium's SourceRecord with typed Struct values, what every Flink CDC job starts from),
 * counted by their op; mode {@code json}: through JsonDebeziumDeserializationSchema, the deserializer Flink CDC's
 * documentation starts with.
 */
public final class FlinkBinlogCount {
    static final AtomicLong ROWS = new AtomicLong();
    static final AtomicLong FIRST = new AtomicLong();

    /** The change rows one record stands for: 2 for an update, 1 for an insert or delete, 0 for anything else. */
    static long weight(String op) {
        if (op == null) {
            return 0;
        }
        switch (op) {
            case "u":
                return 2;
            case "c":
            case "d":
                return 1;
            default:
                return 0;
        }
    }

    /** The records themselves, each counted by its op; no JSON. */
    static final class Records implements DebeziumDeserializationSchema<Long> {
        @Override
        public void deserialize(SourceRecord record, Collector<Long> out) {
            Object value = record.value();
            if (value instanceof Struct && ((Struct) value).schema().field("op") != null) {
                long w = weight(((Struct) value).getString("op"));
                if (w > 0) {
                    out.collect(w);
                }
            }
        }

        @Override
        public TypeInformation<Long> getProducedType() {
            return Types.LONG;
        }
    }

    static final class CountRecords implements SinkFunction<Long> {
        @Override
        public void invoke(Long w, Context context) {
            add(w);
        }
    }

    static final class CountJson implements SinkFunction<String> {
        @Override
        public void invoke(String json, Context context) {
            int at = json.lastIndexOf("\"op\":\"");
            long w = at < 0 ? 0 : weight(json.substring(at + 6, at + 7));
            if (w > 0) {
                add(w);
            }
        }
    }

    static void add(long w) {
        FIRST.compareAndSet(0, System.nanoTime());
        ROWS.addAndGet(w);
    }

    /** Flink CDC's source of the one table, from the given binlog file and position, through {@code deserializer}. */
    static <T> MySqlSource<T> source(String[] args, String password, DebeziumDeserializationSchema<T> deserializer) {
        String table = args[6];
        return MySqlSource.<T>builder().hostname(args[0]).port(Integer.parseInt(args[1])).username(args[2])
                .password(password == null ? "" : password).databaseList(table.substring(0, table.indexOf('.')))
                .tableList(table).serverId("5401").serverTimeZone("UTC")
                .startupOptions(StartupOptions.specificOffset(args[3], Long.parseLong(args[4])))
                .deserializer(deserializer).build();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println("usage: FlinkBinlogCount host port user file position expected db.table records|json"
                    + " (password on standard input)");
            System.exit(2);
        }
        String password = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        long expected = Long.parseLong(args[5]);
        boolean json = args[7].equals("json");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        if (json) {
            env.fromSource(source(args, password, new JsonDebeziumDeserializationSchema()),
                    WatermarkStrategy.noWatermarks(), "mysql-cdc").addSink(new CountJson());
        } else {
            env.fromSource(source(args, password, new Records()), WatermarkStrategy.noWatermarks(), "mysql-cdc")
                    .addSink(new CountRecords());
        }
        long start = System.nanoTime();
        JobClient job = env.executeAsync("bench: Flink CDC binlog read");
        long deadline = start + 3_600_000_000_000L;
        // the job's result is asked for once (a poll of its status after the job's local cluster has shut down
        // would throw instead of giving the cause); every 20 ms, to take little of 2 cores from Flink
        java.util.concurrent.CompletableFuture<?> result = job.getJobExecutionResult();
        while (ROWS.get() < expected) {
            if (result.isDone()) {
                String cause = "";
                try {
                    result.get();
                } catch (Exception e) {  // the job's failure: its innermost cause says why
                    Throwable t = e;
                    while (t.getCause() != null && t.getCause() != t) {
                        t = t.getCause();
                    }
                    cause = ": " + t;
                }
                System.err.println("the Flink job ended after " + ROWS.get() + " of " + expected + " change rows"
                        + cause.replace('\n', ' '));
                System.err.flush();
                Runtime.getRuntime().halt(1);
            }
            if (System.nanoTime() > deadline) {
                System.err.println("timed out after " + ROWS.get() + " of " + expected + " change rows");
                System.err.flush();
                Runtime.getRuntime().halt(1);
            }
            Thread.sleep(20);
        }
        long end = System.nanoTime();
        System.out.println("{\"rows\": " + ROWS.get() + ", \"seconds\": " + (end - start) / 1e9
                + ", \"first_to_last\": " + (end - FIRST.get()) / 1e9 + "}");
        System.out.flush();
        Runtime.getRuntime().halt(0);  // the job never ends by itself (the binlog is followed); nothing to keep
    }
}
