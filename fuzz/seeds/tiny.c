struct node { struct node *next; long value; };
struct node head;
static void pause_forever(void) { for (;;) __asm__ volatile("mov $34, %%eax; syscall" ::: "rax", "rcx", "r11", "memory"); }
void _start(void) { head.value = 42; pause_forever(); }
