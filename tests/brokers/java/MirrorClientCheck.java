// MirrorMaker 2's own client reading what our mirror wrote: RemoteClusterUtils.translateOffsets on
// the checkpoints, and Heartbeat.deserializeRecord on the heartbeats. Run in source-file mode:
//   java -cp '<connect-mirror jars>/*' MirrorClientCheck.java <target bootstrap> <source alias> <group>
// Prints "offset <topic> <partition> <offset>" per translated partition and "heartbeat <source> <target>".

import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class MirrorClientCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], alias = args[1], group = args[2];
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);
        Map<TopicPartition, OffsetAndMetadata> offsets =
            RemoteClusterUtils.translateOffsets(props, alias, group, Duration.ofSeconds(30));
        Map<String, Long> sorted = new TreeMap<>();
        offsets.forEach((tp, om) -> sorted.put(tp.topic() + " " + tp.partition(), om.offset()));
        sorted.forEach((tp, offset) -> System.out.println("offset " + tp + " " + offset));

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition heartbeats = new TopicPartition("heartbeats", 0);
            consumer.assign(Collections.singletonList(heartbeats));
            consumer.seekToBeginning(Collections.singletonList(heartbeats));
            long deadline = System.currentTimeMillis() + 30000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    Heartbeat heartbeat = Heartbeat.deserializeRecord(record);
                    System.out.println("heartbeat " + heartbeat.sourceClusterAlias() + " "
                                       + heartbeat.targetClusterAlias());
                    return;
                }
            }
        }
    }
}
