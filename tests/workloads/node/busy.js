// outer() calls inner() in a loop for SECONDS (argv[2]), after saying
// "ready". tests/node.rs: every sample of the main thread runs inner under
// outer.
function inner(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += (i * i) % 7;
  return s;
}
function outer(end) {
  let t = 0;
  while (Date.now() < end) t += inner(100000);
  return t;
}
const end = Date.now() + 1000 * Number(process.argv[2] || 10);
console.log("ready");
outer(end);
