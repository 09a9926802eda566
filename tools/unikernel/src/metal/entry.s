# The image's first instructions. QEMU's PVH loader enters `pvh_start` in 32-bit protected mode,
# paging off, interrupts off, with EBX = the physical address of `hvm_start_info`. This code
# saves EBX, takes its own stack, zeroes .bss, maps the first 4 GiB identity with 2 MiB pages,
# turns on PAE, long mode and paging, loads a flat GDT and calls `kmain(start_info)` in 64-bit
# mode. Rust then replaces these page tables with ones that give each range its memory type.

    .section .note.pvh, "a", @note
    .balign 4
    .long 4                         # namesz
    .long 8                         # descsz
    .long 18                        # XEN_ELFNOTE_PHYS32_ENTRY
    .asciz "Xen"
    .balign 4
    .quad pvh_start

    .section .text.pvh_entry, "ax"
    .code32
    .globl pvh_start
pvh_start:
    cli
    cld
    movl %ebx, boot_start_info
    movl $__stack_top, %esp
    # .bss: zeroed here (the stack is in it, unused so far; boot_start_info is in .data).
    movl $__bss_start, %edi
    movl $__bss_end, %ecx
    subl %edi, %ecx
    shrl $2, %ecx
    xorl %eax, %eax
    rep stosl
    # PML4[0] -> PDPT; PDPT[0..4] -> four page directories; 2048 x 2 MiB pages, 0..4 GiB.
    movl $boot_pdpt, %eax
    orl $3, %eax
    movl %eax, boot_pml4
    movl $boot_pd, %eax
    orl $3, %eax
    movl $boot_pdpt, %edi
    movl $4, %ecx
1:  movl %eax, (%edi)
    addl $4096, %eax
    addl $8, %edi
    loop 1b
    movl $boot_pd, %edi
    movl $0x83, %eax                # present, writable, 2 MiB
    movl $2048, %ecx
2:  movl %eax, (%edi)
    addl $0x200000, %eax
    addl $8, %edi
    loop 2b
    movl $boot_pml4, %eax
    movl %eax, %cr3
    movl %cr4, %eax
    orl $0x20, %eax                 # CR4.PAE
    movl %eax, %cr4
    movl $0xC0000080, %ecx          # IA32_EFER
    rdmsr
    orl $0x100, %eax                # LME
    wrmsr
    movl %cr0, %eax
    orl $0x80000001, %eax           # PG | PE
    movl %eax, %cr0
    lgdt boot_gdt_ptr
    ljmp $0x08, $long_entry

    .code64
long_entry:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movq $__stack_top, %rsp
    xorl %ebp, %ebp
    movl boot_start_info(%rip), %edi
    call kmain
3:  cli
    hlt
    jmp 3b

# Every interrupt and exception: the stub pushed (error code or 0) and the vector; save the
# registers the C ABI lets a callee clobber, hand vector, error code and rip to `isr_dispatch`
# (defined by the image, src/main.rs), restore, return.
# The CPU aligned RSP to 16 before its 5-word frame; with the 2 words of the stub and these 9,
# RSP is 16-aligned at the call.
    .globl isr_common
isr_common:
    pushq %rax
    pushq %rcx
    pushq %rdx
    pushq %rsi
    pushq %rdi
    pushq %r8
    pushq %r9
    pushq %r10
    pushq %r11
    movq 72(%rsp), %rdi  # the vector the stub pushed
    movq 80(%rsp), %rsi  # the error code (the CPU's, or the stub's 0)
    movq 88(%rsp), %rdx  # the interrupted rip
    call isr_dispatch
    popq %r11
    popq %r10
    popq %r9
    popq %r8
    popq %rdi
    popq %rsi
    popq %rdx
    popq %rcx
    popq %rax
    addq $16, %rsp
    iretq

    .section .rodata.boot_gdt, "a"
    .balign 8
boot_gdt:
    .quad 0
    .quad 0x00AF9A000000FFFF        # 0x08: 64-bit code
    .quad 0x00CF92000000FFFF        # 0x10: data
boot_gdt_end:
    .balign 4
boot_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .long boot_gdt

    .section .data.boot_start_info, "aw"
    .balign 8
    .globl boot_start_info
boot_start_info:
    .quad 0

    .section .bss.boot, "aw", @nobits
    .balign 4096
boot_pml4:
    .skip 4096
boot_pdpt:
    .skip 4096
boot_pd:
    .skip 4 * 4096
    .balign 16
    .globl __stack_bottom
__stack_bottom:
    .skip 4 * 1024 * 1024
    .globl __stack_top
__stack_top:
