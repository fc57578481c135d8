/* infer.h — `augur-lda infer` (infer.c): argv[0] is the subcommand; returns the exit
 * status. */
#ifndef AUGUR_DEMOS_LDA_INFER_H
#define AUGUR_DEMOS_LDA_INFER_H

int lda_infer_main(int argc, char **argv);

#endif
