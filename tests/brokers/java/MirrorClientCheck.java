// MirrorMaker 2's own client reading what a mirror wrote: RemoteClusterUtils.translateOffsets on
// the checkpoints, RemoteClusterUtils.upstreamClusters on the heartbeats topics, and
// Heartbeat.deserializeRecord on the heartbeats. Compiled once per cache (maven_jars.java_program):
//   java -cp '<classes>:<connect-mirror jars>/*' MirrorClientCheck <target bootstrap> <source alias> <group>...
// Prints "group <group>" then "offset <topic> <partition> <offset>" per translated partition of each
// group (one JVM for many groups: a start costs seconds), "upstream <alias>" per upstream cluster,
// and "heartbeat <source> <target>" per distinct pair in the heartbeats topic (not read when the
// environment has MIRROR_CLIENT_CHECK_HEARTBEATS=0).

import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class MirrorClientCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], alias = args[1];
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);
        for (String group : Arrays.asList(args).subList(2, args.length)) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, alias, group, Duration.ofSeconds(30));
            Map<String, Long> sorted = new TreeMap<>();
            offsets.forEach((tp, om) -> sorted.put(tp.topic() + " " + tp.partition(), om.offset()));
            System.out.println("group " + group);
            sorted.forEach((tp, offset) -> System.out.println("offset " + tp + " " + offset));
        }
        for (String upstream : new TreeSet<>(RemoteClusterUtils.upstreamClusters(props))) {
            System.out.println("upstream " + upstream);
        }

        if ("0".equals(System.getenv("MIRROR_CLIENT_CHECK_HEARTBEATS"))) {
            return;  // the caller wants offsets only: no 30 s wait for heartbeats that may not come
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition heartbeats = new TopicPartition("heartbeats", 0);
            consumer.assign(Collections.singletonList(heartbeats));
            consumer.seekToBeginning(Collections.singletonList(heartbeats));
            long deadline = System.currentTimeMillis() + 30000;
            TreeSet<String> pairs = new TreeSet<>();
            while (System.currentTimeMillis() < deadline) {
                int read = 0;
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    Heartbeat heartbeat = Heartbeat.deserializeRecord(record);
                    pairs.add(heartbeat.sourceClusterAlias() + " " + heartbeat.targetClusterAlias());
                    read++;
                }
                if (read == 0 && !pairs.isEmpty()
                        && consumer.position(heartbeats) >= consumer.endOffsets(Collections.singletonList(heartbeats)).get(heartbeats)) {
                    break;
                }
            }
            pairs.forEach(pair -> System.out.println("heartbeat " + pair));
        }
    }
}
