// The busy loop of tests/java.rs: main -> outer -> inner, for the number
// of seconds given. Says "ready" once the loop has run a second, so that
// the JIT has compiled (and C2 inlined) it when a capture begins.
public class Busy {
    static volatile long sink;

    static long inner(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) {
            x += (i * i) ^ (x >>> 3);
        }
        return x;
    }

    static long outer(long n) {
        long t = 0;
        for (int i = 0; i < 10; i++) {
            t += inner(n + i);
        }
        return t;
    }

    public static void main(String[] args) {
        long now = System.nanoTime();
        long end = now + Long.parseLong(args[0]) * 1_000_000_000L;
        long ready = now + 1_000_000_000L;
        boolean said = false;
        while (System.nanoTime() < end) {
            sink += outer(20_000);
            if (!said && System.nanoTime() >= ready) {
                System.out.println("ready");
                System.out.flush();
                said = true;
            }
        }
    }
}
