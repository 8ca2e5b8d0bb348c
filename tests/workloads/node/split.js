// Three functions sharing the CPU 50/30/20 for SECONDS (argv[2]): each
// round, a() loops 5 units, b() 3 and c() 2. rounds() runs long enough for
// TurboFan to compile its loop with a, b and c inlined into it.
// tests/node.rs compares fgbpf's shares with V8's own sampler
// (node --cpu-prof) on the same process at the same time.
const UNIT = 20000;
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
  while (Date.now() < end) t += a() + b() + c();
  return t;
}
const end = Date.now() + 1000 * Number(process.argv[2] || 10);
console.log("ready");
rounds(end);
