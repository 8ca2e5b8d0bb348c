// The class Churn.java loads again and again under new names (ChurnWork00
// to ChurnWork99), each time in a class loader of its own that is then
// dropped, so that its compiled code is freed and its addresses reused.
public class ChurnWork00 {
    public static long work(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) {
            x += (i * 31) ^ (x >>> 5);
        }
        return x;
    }
}
