/* A program that never calls malloc: nothing a library adds at load can
 * hide behind the program's own start of the allocator. */
int main(void) { return 0; }
