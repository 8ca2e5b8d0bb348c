// A main thread that blocks its event loop synchronously, over and over,
// until SECONDS (argv[3]) have passed: "pipe" reads a byte from stdin
// (a pipe the test writes to every 20 ms) with fs.readSync; "atomics"
// waits 20 ms on a shared array with Atomics.wait.
const fs = require("fs");
function readsPipe(buf) {
  return fs.readSync(0, buf, 0, 1, null);
}
function waitsOnAtomics(cell) {
  return Atomics.wait(cell, 0, 0, 20);
}
function loop(mode, end) {
  const buf = Buffer.alloc(1);
  const cell = new Int32Array(new SharedArrayBuffer(4));
  let n = 0;
  while (Date.now() < end) {
    if (mode === "pipe") {
      if (readsPipe(buf) === 0) break;
    } else {
      waitsOnAtomics(cell);
    }
    n++;
  }
  return n;
}
const end = Date.now() + 1000 * Number(process.argv[3] || 10);
console.log("ready");
loop(process.argv[2], end);
