/* A function whose symbol name is markup: fgbpf must escape it in every
 * SVG and keep folded lines parseable. Burns CPU for about a second. */
#include <time.h>
static volatile unsigned long sink;
void evil(void) __asm__("evil<svg onload=alert(1)>&\"';x");
__attribute__((noinline)) void evil(void) { for (unsigned long i = 0; i < 100000000UL; i++) sink += i; }
int main(void) { evil(); return 0; }
