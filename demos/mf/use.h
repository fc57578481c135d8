/* use.h — `augur-mf predict` and `augur-mf recommend` (use.c): argv[0] is the subcommand.
 * They return the exit status. */
#ifndef AUGUR_DEMOS_MF_USE_H
#define AUGUR_DEMOS_MF_USE_H

int mf_predict_main(int argc, char **argv);
int mf_recommend_main(int argc, char **argv);

#endif
