// Three functions sharing the CPU 50/30/20 for SECONDS (argv[2]): each
// round, a() loops 5 units, b() 3 and c() 2, in a random order. A round
// lasts ~20 ms: a round of 0.125 ms in a fixed order, 16 to a 499 Hz
// sampler's period, let the samples keep landing at the same few points
// of it, and either sampler's shares moved by a few points with the phase.
// tests/node.rs compares fgbpf's shares with V8's own sampler
// (node --cpu-prof) on the same process at the same time.
const UNIT = 3200000;
function a() {
  let s = 0;
  for (let i = 0; i < 5 * UNIT; i++) s += (i ^ (i >> 3)) % 11;
  return s;
}
function b() {
  let s = 0;
  for (let i = 0; i < 3 * UNIT; i++) s += (i ^ (i >> 3)) % 11;
  return s;
}
function c() {
  let s = 0;
  for (let i = 0; i < 2 * UNIT; i++) s += (i ^ (i >> 3)) % 11;
  return s;
}
function rounds(end) {
  let t = 0;
  const order = [a, b, c];
  while (Date.now() < end) {
    for (let i = 2; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    for (const f of order) t += f();
  }
  return t;
}
const end = Date.now() + 1000 * Number(process.argv[2] || 10);
console.log("ready");
rounds(end);
