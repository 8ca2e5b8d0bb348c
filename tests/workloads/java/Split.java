// Three methods sharing one thread's time 50/30/20 (tests/java.rs), each a
// call of its own from main's loop, not inlined into one another; for the
// number of seconds given. Says "ready" once the loop has run a second.
public class Split {
    static volatile long sink;

    static long spin(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) {
            x += (i * i) ^ (x >>> 3);
        }
        return x;
    }

    static long fifty() { return spin(50_000); }
    static long thirty() { return spin(30_000); }
    static long twenty() { return spin(20_000); }

    public static void main(String[] args) {
        long now = System.nanoTime();
        long end = now + Long.parseLong(args[0]) * 1_000_000_000L;
        long ready = now + 1_000_000_000L;
        boolean said = false;
        while (System.nanoTime() < end) {
            sink += fifty() + thirty() + twenty();
            if (!said && System.nanoTime() >= ready) {
                System.out.println("ready");
                System.out.flush();
                said = true;
            }
        }
    }
}
