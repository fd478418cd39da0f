package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The codec tool as the cross-language test runs it: a process, one line in, one line out. */
class CodecToolProcessTest {
    @Test
    void theToolAnswersLineByLineAndExitsAtTheEndOfItsInput() throws IOException, InterruptedException {
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                                       "seqbus.codec.tool.CodecTool", "exchange")
            .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        try {
            OutputStream in = p.getOutputStream();
            BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(),
                                                                          StandardCharsets.UTF_8));
            Vectors.Vector v = Vectors.all().stream().filter(x -> x.file.equals("NewOrder.1.bin"))
                .findFirst().orElseThrow();
            // one message at a time: each answer comes before the next question
            for (String question : List.of(VectorsTest.hex(v.bytes), "0a00", "zz", "")) {
                in.write((question + "\n").getBytes(StandardCharsets.UTF_8));
                in.flush();
                String answer = out.readLine();
                if (question.equals(VectorsTest.hex(v.bytes))) {
                    assertEquals("{\"name\":\"NewOrder\",\"json\":" + v.json + ",\"hex\":\"" + question
                                 + "\"}", answer);
                } else {
                    assertTrue(answer.startsWith("{\"error\":"), answer);
                }
            }
            in.close();
            assertEquals(null, out.readLine());
            assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the tool did not exit");
            assertEquals(0, p.exitValue());
        } finally {
            p.destroyForcibly();
        }
        Process bad = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                                         "seqbus.codec.tool.CodecTool", "nosuch")
            .redirectErrorStream(true).start();
        assertTrue(bad.waitFor(30, TimeUnit.SECONDS));
        assertEquals(2, bad.exitValue());
    }
}
