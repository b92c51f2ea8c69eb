/* Runs a program with an environment given entry by entry, as execve
 * takes it: entries without '=', a name given twice, in any order (what
 * setenv and a shell never make, and programs' own execve calls can).
 *
 *   rawenv ENTRY... -- PROGRAM ARGS...   */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int dashes = 1;
    while (dashes < argc && strcmp(argv[dashes], "--") != 0)
        dashes++;
    if (dashes + 1 >= argc) {
        fprintf(stderr, "usage: rawenv ENTRY... -- PROGRAM ARGS...\n");
        return 2;
    }
    argv[dashes] = NULL;
    execve(argv[dashes + 1], argv + dashes + 1, argv + 1);
    perror("rawenv: execve");
    return 127;
}
