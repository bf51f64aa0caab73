/* The pause of a thread that spins on a word another thread or process
 * writes. */
#ifndef RO_CPU_RELAX_H
#define RO_CPU_RELAX_H

/* ro__cpu_relax tells the CPU this is a spin-wait loop: on x86 PAUSE (the
 * sibling hyperthread runs meanwhile, and leaving the loop costs no memory
 * order mis-speculation), on ARM YIELD; elsewhere nothing. Any thread. */
static inline void ro__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

#endif
