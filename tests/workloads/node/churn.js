// Hard allocation for SECONDS (argv[2]): each round builds fresh
// functions from source (new Function: their SharedFunctionInfos die with
// the round and their addresses are reused), closures, objects and
// strings, so that the garbage collector scavenges, compacts and flushes
// code while fgbpf names frames. tests/node.rs: no frame is named with a
// function this script does not define or V8's own sampler does not see.
function makeWorker(i) {
  return new Function("n", "let s = " + i + "; for (let k = 0; k < n; k++) s += (k * " + (i % 13) + ") % 7; return s;");
}
function allocate(n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push({ i, s: "v" + i, a: [i, i + 1, i + 2] });
  return out.length;
}
function closures(n) {
  let t = 0;
  for (let i = 0; i < n; i++) {
    const f = (x) => x + i;
    t += f(i);
  }
  return t;
}
function round(r) {
  let t = 0;
  for (let i = 0; i < 20; i++) t += makeWorker(r * 20 + i)(2000);
  t += allocate(20000);
  t += closures(20000);
  return t;
}
const end = Date.now() + 1000 * Number(process.argv[2] || 10);
console.log("ready");
let r = 0;
while (Date.now() < end) round(r++);
