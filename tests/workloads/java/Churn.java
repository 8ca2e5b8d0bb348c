// Class loading and unloading for the number of seconds given
// (tests/java.rs): ChurnWork00's bytes are defined again under a new name
// (ChurnWork01, ...) in a throwaway class loader, run until the JIT has
// compiled it, and dropped; a GC every few rounds unloads the old ones and
// frees their compiled code. Says "ready" once the first round is done.
import java.io.InputStream;
import java.lang.reflect.Method;

public class Churn {
    static volatile long sink;

    static byte[] renamed(byte[] bytes, String from, String to) {
        byte[] out = bytes.clone();
        byte[] f = from.getBytes(), t = to.getBytes();
        for (int i = 0; i + f.length <= out.length; i++) {
            boolean same = true;
            for (int j = 0; j < f.length && same; j++) {
                same = out[i + j] == f[j];
            }
            if (same) {
                System.arraycopy(t, 0, out, i, t.length);
            }
        }
        return out;
    }

    static class Loader extends ClassLoader {
        Class<?> define(String name, byte[] b) {
            return defineClass(name, b, 0, b.length);
        }
    }

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        byte[] bytes;
        try (InputStream in = Churn.class.getResourceAsStream("/ChurnWork00.class")) {
            bytes = in.readAllBytes();
        }
        boolean said = false;
        for (int round = 1; System.nanoTime() < end; round++) {
            String name = String.format("ChurnWork%02d", round % 100);
            Class<?> c = new Loader().define(name, renamed(bytes, "ChurnWork00", name));
            Method work = c.getMethod("work", long.class);
            long stop = System.nanoTime() + 300_000_000L;
            while (System.nanoTime() < stop) {
                sink += (Long) work.invoke(null, 20_000L);
            }
            if (round % 5 == 0) {
                System.gc();
            }
            if (!said) {
                System.out.println("ready");
                System.out.flush();
                said = true;
            }
        }
    }
}
