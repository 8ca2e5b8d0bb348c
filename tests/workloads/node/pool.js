// Four hashes at a time on libuv's thread pool (crypto.pbkdf2, each
// starting the next when it ends) for SECONDS (argv[2]). tests/node.rs:
// the pool's threads, which the kernel knows as "node", are named by
// what they run.
const crypto = require("crypto");
const end = Date.now() + 1000 * Number(process.argv[2] || 10);
function hash() {
  if (Date.now() < end) crypto.pbkdf2("secret", "salt", 20000, 64, "sha512", hash);
}
for (let i = 0; i < 4; i++) hash();
console.log("ready");
