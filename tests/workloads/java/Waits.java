// Threads that wait, each its own way, for the number of seconds given
// (tests/java.rs): "sleeper" in Thread.sleep, "waiter" in Object.wait,
// "parker" in LockSupport.parkNanos (what java.util.concurrent waits in),
// "reader" in blocking socket reads that main answers with a byte every
// 100 ms, and "stuck" in a socket read that nothing answers (blocked from
// before any capture to its end). Says "ready" once all of them wait.
import java.io.InputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.LockSupport;

public class Waits {
    static final Object lock = new Object();

    static void sleeper(long ms) throws Exception {
        long end = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < end) {
            Thread.sleep(50);
        }
    }

    static void waiter(long ms) throws Exception {
        long end = System.currentTimeMillis() + ms;
        synchronized (lock) {
            while (System.currentTimeMillis() < end) {
                lock.wait(50);
            }
        }
    }

    static void parker(long ms) {
        long end = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < end) {
            LockSupport.parkNanos(50_000_000L);
        }
    }

    static void reader(Socket s) throws Exception {
        InputStream in = s.getInputStream();
        while (in.read() >= 0) {
        }
    }

    public static void main(String[] args) throws Exception {
        long ms = Long.parseLong(args[0]) * 1000L;
        ServerSocket server = new ServerSocket(0);
        Socket client = new Socket("127.0.0.1", server.getLocalPort());
        Socket accepted = server.accept();
        Socket silent = new Socket("127.0.0.1", server.getLocalPort());
        Socket unanswered = server.accept();
        CountDownLatch started = new CountDownLatch(5);
        Thread a = new Thread(() -> { started.countDown(); try { sleeper(ms); } catch (Exception e) { } }, "sleeper");
        Thread b = new Thread(() -> { started.countDown(); try { waiter(ms); } catch (Exception e) { } }, "waiter");
        Thread c = new Thread(() -> { started.countDown(); try { reader(client); } catch (Exception e) { } }, "reader");
        Thread d = new Thread(() -> { started.countDown(); try { reader(silent); } catch (Exception e) { } }, "stuck");
        Thread e = new Thread(() -> { started.countDown(); parker(ms); }, "parker");
        for (Thread t : new Thread[] {a, b, c, d, e}) {
            t.setDaemon(true);
            t.start();
        }
        started.await();
        Thread.sleep(200);
        System.out.println("ready");
        System.out.flush();
        long end = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < end) {
            accepted.getOutputStream().write(1);
            Thread.sleep(100);
        }
        a.join();
        b.join();
        accepted.close();
        unanswered.close();
    }
}
