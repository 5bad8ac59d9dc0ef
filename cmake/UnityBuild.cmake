# Unity builds for the targets whose files each instantiate the same header-only library: the
# command line's files each paid for CLI11 again (its 22 files took 132 s of compiling, 36 s as
# one unity file). A file's helpers in an anonymous namespace then share a scope with the
# others' of its batch: their names must differ. Files are compiled in batches, so two cores
# still have two files to work on; a developer who wants the shortest rebuild of one file
# turns it off: cmake -DGROWTRACE_UNITY_BUILD=OFF.
option(GROWTRACE_UNITY_BUILD "Compile the command line's files as unity batches" ON)

# growtrace_unity(TARGET BATCH_SIZE): TARGET's files compiled BATCH_SIZE at a time.
function(growtrace_unity target batch_size)
  if(GROWTRACE_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch_size})
  endif()
endfunction()
