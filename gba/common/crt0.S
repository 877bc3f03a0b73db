@ Start-up code shared by the bundled games: cartridge header, stacks, .data/.bss set-up,
@ the IRQ handler address, then main(). GAME_TITLE and GAME_CODE come from the Makefile.
    .section .crt0, "ax"
    .arm
    .global _start
_start:
    b       _entry
    .org    0xA0
    .ascii  GAME_TITLE          @ 12 bytes, padded by the Makefile
    .org    0xAC
    .ascii  GAME_CODE           @ 4 bytes
    .ascii  "MB"                @ maker
    .byte   0x96                @ fixed value
    .byte   0x00                @ main unit code
    .byte   0x00                @ device type
    .fill   7, 1, 0             @ reserved
    .byte   0x00                @ software version
    .byte   0x00                @ complement check, patched by tools/gbafix.py
    .fill   2, 1, 0             @ reserved
_entry:
    mov     r0, #0x12           @ IRQ mode
    msr     cpsr_c, r0
    ldr     sp, =0x03007FA0
    mov     r0, #0x1F           @ System mode
    msr     cpsr_c, r0
    ldr     sp, =0x03007F00
    @ copy .iwram (code and initialised data) from ROM
    ldr     r0, =__iwram_lma
    ldr     r1, =__iwram_start
    ldr     r2, =__iwram_end
1:  cmp     r1, r2
    ldrlo   r3, [r0], #4
    strlo   r3, [r1], #4
    blo     1b
    @ zero .bss (IWRAM) and .ewram (EWRAM, holds the game state struct)
    mov     r3, #0
    ldr     r1, =__bss_start
    ldr     r2, =__bss_end
2:  cmp     r1, r2
    strlo   r3, [r1], #4
    blo     2b
    ldr     r1, =__ewram_start
    ldr     r2, =__ewram_end
3:  cmp     r1, r2
    strlo   r3, [r1], #4
    blo     3b
    @ the BIOS jumps to the address stored at 0x03007FFC on an interrupt
    ldr     r0, =irq_handler
    ldr     r1, =0x03007FFC
    str     r0, [r1]
    ldr     r0, =main
    mov     lr, pc
    bx      r0
4:  b       4b
    .ltorg

@ IRQ handler (ARM, in IWRAM): acknowledge in IF and in the BIOS flag word at 0x03007FF8,
@ which VBlankIntrWait polls; without the second write it never returns.
    .section .iwram, "ax"
    .arm
    .align 2
    .global irq_handler
irq_handler:
    mov     r0, #0x04000000
    add     r0, r0, #0x200
    ldr     r1, [r0]            @ IE (low half) | IF (high half)
    and     r1, r1, r1, lsr #16 @ pending & enabled
    strh    r1, [r0, #2]        @ acknowledge in IF
    ldr     r0, =0x03007FF8
    ldrh    r2, [r0]
    orr     r2, r2, r1
    strh    r2, [r0]
    bx      lr
    .ltorg
