#include "textflag.h"

// func prefetch2(p unsafe.Pointer)
TEXT ·prefetch2(SB), NOSPLIT, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PLDL1KEEP
	PRFM 64(R0), PLDL1KEEP
	RET
