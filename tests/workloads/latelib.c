/* Loads a library only after it started, prints the address of one of its
 * functions, lingers, then exits: code mapped after a process was first
 * seen. Usage: latelib */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	usleep(300000);
	void *lib = dlopen("libm.so.6", RTLD_NOW);
	if (!lib)
		return 1;
	printf("%p\n", dlsym(lib, "cos"));
	fflush(stdout);
	usleep(1000000);
	return 0;
}
