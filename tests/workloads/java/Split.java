// Three methods sharing one thread's time 50/30/20 (tests/java.rs), each a
// call of its own from main's loop, not inlined into one another; for the
// number of seconds given. Says "ready" once the loop has run a second.
// A round lasts ~20 ms (ten periods of a 499 Hz sampler) and calls the
// three in a random order: a round of 0.1 ms in a fixed order lets a
// sampler's fixed period land on the same few points of it.
public class Split {
    static volatile long sink;

    static long spin(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) {
            x += (i * i) ^ (x >>> 3);
        }
        return x;
    }

    static long fifty() { return spin(10_000_000); }
    static long thirty() { return spin(6_000_000); }
    static long twenty() { return spin(4_000_000); }

    public static void main(String[] args) {
        long now = System.nanoTime();
        long end = now + Long.parseLong(args[0]) * 1_000_000_000L;
        long ready = now + 1_000_000_000L;
        boolean said = false;
        java.util.Random random = new java.util.Random();
        while (System.nanoTime() < end) {
            // One of the six orders: a first method, then the others
            // one way round or the other.
            int first = random.nextInt(3), step = 1 + random.nextInt(2);
            for (int k = 0; k < 3; k++) {
                int m = (first + k * step) % 3;
                sink += m == 0 ? fifty() : m == 1 ? thirty() : twenty();
            }
            if (!said && System.nanoTime() >= ready) {
                System.out.println("ready");
                System.out.flush();
                said = true;
            }
        }
    }
}
